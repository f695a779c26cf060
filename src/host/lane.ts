/**
 * The lane large bodies are authenticated in: one worker thread, one body at a time, the smallest waiting
 * body first, with a heap of its own. A 4 MiB body of tiny values costs 1–3 s of CPU and about 100 MB of
 * heap to parse and canonicalise before its signature can be checked (docs/performance.md); on the event
 * loop that blocked every other request for as long, so 100 such bodies starved a valid action for minutes.
 * Here they cost the worker's time and heap only, and a body whose client has gone is never authenticated.
 */
import { Worker } from 'node:worker_threads';
import type { EarlyAnswer } from './authenticate.js';
import type { PinnedIdentity } from './checks.js';
import { type SigningKey, shareableKey } from './wire/keys.js';

/** The answer to give (checks 1–3 refused it), `authenticated` (the gateway signed it), or `abandoned` (the client went away first). */
export type LaneOutcome = EarlyAnswer | 'authenticated' | 'abandoned';

export interface AuthenticationLane {
  /** Rejects when the worker failed on this body (it ran out of its heap, or threw). */
  authenticate(body: Buffer, signal?: AbortSignal): Promise<LaneOutcome>;
  /** Stops the worker; bodies still waiting are abandoned. */
  close(): Promise<void>;
}

export interface LaneOptions {
  readonly key: SigningKey;
  readonly pinned: PinnedIdentity;
  /** The worker's old-generation heap, in MB: a body that needs more fails alone, and the next one gets a fresh worker. */
  readonly heapMb: number;
  /** The worker's entry (default: authenticate-worker.js beside this module). */
  readonly workerUrl?: URL;
}

/** What the worker posts back for one body. */
export type WorkerReply = { outcome: EarlyAnswer | 'authenticated' } | { failed: string };

interface Job {
  readonly body: Buffer;
  readonly signal: AbortSignal | undefined;
  readonly resolve: (outcome: LaneOutcome) => void;
  readonly reject: (error: Error) => void;
}

export function createAuthenticationLane(options: LaneOptions): AuthenticationLane {
  const waiting = new Set<Job>();
  let worker: Worker | undefined;
  let current: Job | undefined;
  let closed = false;

  const settleCurrent = (settle: (job: Job) => void): void => {
    const job = current;
    current = undefined;
    if (job !== undefined) settle(job);
    pump();
  };

  const start = (): Worker => {
    const started = new Worker(options.workerUrl ?? new URL('./authenticate-worker.js', import.meta.url), {
      workerData: { key: shareableKey(options.key), pinned: options.pinned },
      resourceLimits: { maxOldGenerationSizeMb: options.heapMb },
    });
    // The lane never keeps the process alive: the requests waiting on it do.
    started.unref();
    let failure = 'it exited';
    started.on('message', (reply: WorkerReply) => {
      settleCurrent((job) => ('failed' in reply ? job.reject(new Error(`authenticating the body failed (${reply.failed})`)) : job.resolve(reply.outcome)));
    });
    started.on('error', (error: Error & { code?: string }) => {
      failure = error.code ?? error.name;
    });
    started.on('exit', () => {
      if (worker === started) worker = undefined;
      settleCurrent((job) => (closed ? job.resolve('abandoned') : job.reject(new Error(`the authentication worker stopped on this body (${failure})`))));
    });
    return started;
  };

  /** Hands the smallest waiting body to the worker when it is free. */
  const pump = (): void => {
    if (current !== undefined || closed) return;
    let next: Job | undefined;
    for (const job of waiting) if (next === undefined || job.body.length < next.body.length) next = job;
    if (next === undefined) return;
    waiting.delete(next);
    current = next;
    worker ??= start();
    worker.postMessage(next.body);
  };

  return {
    authenticate(body, signal) {
      if (closed || signal?.aborted) return Promise.resolve('abandoned');
      return new Promise<LaneOutcome>((resolve, reject) => {
        const job: Job = { body, signal, resolve, reject };
        waiting.add(job);
        // A client that leaves while its body waits frees its place at once (and, in the server, its share of the body budget).
        signal?.addEventListener(
          'abort',
          () => {
            if (waiting.delete(job)) resolve('abandoned');
          },
          { once: true },
        );
        pump();
      });
    },
    async close() {
      closed = true;
      for (const job of waiting) job.resolve('abandoned');
      waiting.clear();
      await worker?.terminate();
    },
  };
}
