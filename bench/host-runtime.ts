/**
 * The host bench's runtime double in its own process (forked with the bench's tsx loader): the
 * control plane, callback ingress and dispatcher of test/helpers/aip-runtime, so that while the bench
 * process serves as the host, the CPU of signing requests and verifying answers lands here. The bench
 * asks over IPC: `describe` (where the host reaches the runtime), `trust` (a host's DID before it
 * registers, then its route), `actions` (sequential signed run_status actions, every answer verified
 * as the reference runtime verifies it), `wire` (one action's request bytes POSTed as they are to
 * another server), `envelope` (one signed action's request text).
 */
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { request } from 'undici';
import type { HostIdentity } from '../test/helpers/aip-runtime/callback-ingress.js';
import { runAction } from '../test/helpers/aip-runtime/deployment-fixture.js';
import type { HostTarget } from '../test/helpers/aip-runtime/dispatcher.js';
import { type RuntimeCoordinates, routeToHost, runtimeCoordinates } from '../test/helpers/aip-runtime/launcher.js';
import { startAipRuntime, type AipRuntime } from '../test/helpers/aip-runtime/runtime.js';
import { forkServer, type ForkedServer } from './ledger-server.js';
import { STATUS_RUN_ID } from './servers.js';

const FLAG = '--host-runtime';

export type RuntimeAsk =
  | { kind: 'describe' }
  | { kind: 'trust'; origin: string; identity: HostIdentity }
  | { kind: 'actions'; calls: number }
  | { kind: 'wire'; calls: number; url: string }
  | { kind: 'envelope' };

/** A slice's wall time, with the size of the last answer read. */
export interface TimedCalls {
  seconds: number;
  answerBytes: number;
}

/** The runtime double's process; every `ask` rejects with the error the double met. */
export interface RemoteRuntime {
  readonly pid: number;
  describe(): Promise<RuntimeCoordinates>;
  /** Trusts `identity.did` with the control plane; once the host listens (before it registers), routes to it. */
  trust(origin: string, identity: HostIdentity): Promise<void>;
  actions(calls: number): Promise<TimedCalls>;
  wire(calls: number, url: string): Promise<TimedCalls>;
  envelope(): Promise<string>;
  close(): Promise<void>;
}

export async function startRemoteRuntime(): Promise<RemoteRuntime> {
  const child = await forkServer(fileURLToPath(import.meta.url), FLAG);
  const ask = async <T>(message: RuntimeAsk): Promise<T> => {
    const answer = await child.ask<T | { error: string }>(message);
    if (answer !== null && typeof answer === 'object' && 'error' in answer) throw new Error(`the runtime double: ${answer.error}`);
    return answer as T;
  };
  return remote(child, ask);
}

function remote(child: ForkedServer, ask: <T>(message: RuntimeAsk) => Promise<T>): RemoteRuntime {
  return {
    pid: child.pid,
    describe: () => ask({ kind: 'describe' }),
    trust: (origin, identity) => ask({ kind: 'trust', origin, identity }),
    actions: (calls) => ask({ kind: 'actions', calls }),
    wire: (calls, url) => ask({ kind: 'wire', calls, url }),
    envelope: () => ask<{ text: string }>({ kind: 'envelope' }).then(({ text }) => text),
    close: () => child.close(),
  };
}

async function timedCalls(calls: number, call: () => Promise<number>): Promise<TimedCalls> {
  let answerBytes = 0;
  const started = performance.now();
  for (let i = 0; i < calls; i++) answerBytes = await call();
  return { seconds: (performance.now() - started) / 1000, answerBytes };
}

function serve(runtime: AipRuntime): (message: RuntimeAsk) => Promise<unknown> {
  let target: HostTarget | undefined;
  const routed = (): HostTarget => {
    if (target === undefined) throw new Error('no host trusted yet');
    return target;
  };
  const action = async (): Promise<number> => {
    const outcome = await runtime.dispatcher.invoke(routed(), runAction('run_status', STATUS_RUN_ID));
    if (outcome.verdict.failed.length > 0 || outcome.verdict.actionResult?.status !== 'completed') {
      throw new Error(`the host answered ${outcome.exchange.status}: ${outcome.verdict.failed.join('; ') || outcome.exchange.text.slice(0, 300)}`);
    }
    return Buffer.byteLength(outcome.exchange.text);
  };
  const wire = (url: string, prepared: ReturnType<AipRuntime['dispatcher']['prepareAction']>) => async (): Promise<number> => {
    const response = await request(url, { method: 'POST', headers: prepared.headers, body: prepared.text });
    return (await response.body.arrayBuffer()).byteLength;
  };
  const prepare = () => runtime.dispatcher.prepareAction(routed(), runAction('run_status', STATUS_RUN_ID));
  return async (message) => {
    switch (message.kind) {
      case 'describe':
        return runtimeCoordinates(runtime);
      case 'trust':
        if (!runtime.hostDids.includes(message.identity.did)) runtime.hostDids.push(message.identity.did);
        target = (await routeToHost(runtime, message.origin, message.identity)).target;
        return {};
      case 'actions':
        return timedCalls(message.calls, action);
      case 'wire':
        return timedCalls(message.calls, wire(message.url, prepare()));
      case 'envelope':
        return { text: prepare().text };
    }
  };
}

async function main(): Promise<void> {
  const runtime = await startAipRuntime();
  const answer = serve(runtime);
  process.on('disconnect', () => void runtime.close().finally(() => process.exit(0)));
  process.on('message', (message: RuntimeAsk) => {
    answer(message).then(
      (result) => process.send?.(result),
      (error: unknown) => process.send?.({ error: error instanceof Error ? error.message : String(error) }),
    );
  });
  process.send?.({ port: new URL(runtime.control.url).port });
}

if (process.argv[2] === FLAG) void main();
