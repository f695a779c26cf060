/**
 * The connector (built, from dist/) against the real Hermes Agent of every installed release, with
 * a fake model: approvals granted and denied, isolated approval queues, stop, a cut stream, error
 * mappings, and the ledger's replay. One Hermes per release for the whole file; its concurrency
 * gate is off here (rate-limit.test.ts covers it), so unread streams cannot interfere.
 */
import { existsSync, readdirSync, readlinkSync } from 'node:fs';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { createHermesConnector, type AipActionResult, type AipStreamChunk, type RunEventsOutput } from 'aip-connector-hermes-agent';
import { checkedConnector, ENDPOINT, eventually, grantFor, nextId, type CheckedConnector } from '../helpers/harness.js';
import { describeEachRelease, SCENARIO_TIMEOUT_MS, START_TIMEOUT_MS, startRealEndpoint, type RealEndpoint } from './support.js';

const PREFIX = 'connector.hermes_agent.';
const UNKNOWN_RUN = `run_${'0'.repeat(32)}`;
const MiB = 1024 * 1024;
/**
 * A run the fake model drives has its first event within this once Hermes has begun it, even on a
 * loaded machine (26 s seen for a release's first run at a load average of 10, 2 s for later ones).
 */
const SESSION_TURN_SILENCE_MS = 30_000;

describeEachRelease('real Hermes %s', { timeout: SCENARIO_TIMEOUT_MS }, (version) => {
  let endpoint: RealEndpoint;
  let h: CheckedConnector;
  beforeAll(async () => {
    endpoint = await startRealEndpoint({ version, maxConcurrentRuns: 0 });
    h = endpoint.h;
  }, START_TIMEOUT_MS);
  afterAll(async () => {
    await endpoint?.close();
  }, START_TIMEOUT_MS);

  const statusOf = async (runId: string) => {
    const result = await h.invoke({ capability_id: h.cap('run_status'), input: { run_id: runId } });
    expect(result.status, JSON.stringify(result.error)).toBe('completed');
    return result.output as { status: string; output?: string; last_event?: string | null; session_id?: string };
  };
  /** Polls run_status (bounded only to fail a hung test). */
  const waitForStatus = async (runId: string, wanted: string) => {
    for (let attempt = 0; attempt < 150; attempt++) {
      if ((await statusOf(runId)).status === wanted) return;
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    throw new Error(`run ${runId} never reached ${wanted}; last ${JSON.stringify(await statusOf(runId))}`);
  };
  /**
   * Follows a run until it waits for approval, or until it has gone SESSION_TURN_SILENCE_MS without a
   * single event (no `last_event`): a run of a session waiting for its turn. Bounded only to fail a hung test.
   */
  const approvalOrSilence = async (runId: string): Promise<'approval' | 'silence'> => {
    const silentFrom = Date.now() + SESSION_TURN_SILENCE_MS;
    while (Date.now() < silentFrom + SESSION_TURN_SILENCE_MS) {
      const status = await statusOf(runId);
      if (status.status === 'waiting_for_approval') return 'approval';
      if ((status.last_event ?? null) === null && Date.now() >= silentFrom) return 'silence';
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    throw new Error(`run ${runId} began but never waited for approval; last ${JSON.stringify(await statusOf(runId))}`);
  };
  const answer = (runId: string, choice: 'once' | 'deny') => {
    const input = { run_id: runId, choice };
    return h.invoke({ capability_id: h.cap('run_approval'), input, idempotency_key: nextId('key') }, { approval: grantFor(input) });
  };
  const stop = (runId: string) => {
    const input = { run_id: runId };
    return h.invoke({ capability_id: h.cap('run_stop'), input, idempotency_key: nextId('key') }, { approval: grantFor(input) });
  };
  /** Reads the run's events; `onFirst` runs once, at the first chunk of that kind. */
  const readEvents = async (runId: string, onFirst?: { kind: AipStreamChunk['kind']; act: () => Promise<AipActionResult> }) => {
    let reaction: Promise<AipActionResult> | undefined;
    const events = await h.invoke(
      { capability_id: h.cap('run_events'), input: { run_id: runId } },
      { onChunk: (chunk) => void (chunk.kind === onFirst?.kind && reaction === undefined && (reaction = onFirst.act())) },
    );
    return { events, output: events.output as RunEventsOutput, reaction: await reaction };
  };
  const names = (output: RunEventsOutput) => output.events.map((event) => event.event);
  const withoutDeltas = (output: RunEventsOutput) => names(output).filter((name) => name !== 'message.delta');

  test('an approval granted once: the command runs in the scratch folder and the run completes', async () => {
    const folder = endpoint.scratchFolder('grant-once');
    const runId = await h.startRun({ input: 'Run the shell command: rm -rf ./grant-once' });
    const { events, output, reaction } = await readEvents(runId, { kind: 'pending_approval', act: () => answer(runId, 'once') });

    expect(reaction?.status, JSON.stringify(reaction?.error)).toBe('completed');
    expect(reaction?.output).toEqual({ object: 'hermes.run.approval_response', run_id: runId, choice: 'once', resolved: 1 });
    expect(events.status, JSON.stringify(events.error)).toBe('completed');
    expect(output.terminal_event).toBe('run.completed');
    expect(withoutDeltas(output)).toEqual(['tool.started', 'approval.request', 'approval.responded', 'tool.completed', 'reasoning.available', 'run.completed']);
    expect(names(output)).toContain('message.delta');
    const request = output.events.find((event) => event.event === 'approval.request');
    expect(request?.data).toMatchObject({ command: 'rm -rf ./grant-once', choices: ['once', 'session', 'always', 'deny'], run_id: runId });
    expect(output.events.find((event) => event.event === 'tool.completed')?.data).toMatchObject({ tool: 'terminal', error: false });
    expect(existsSync(folder)).toBe(false);
    expect(await statusOf(runId)).toMatchObject({ status: 'completed', output: 'The command has finished.', last_event: 'run.completed' });
  });

  test.skipIf(version === '0.18.2' || version === '0.19.0')(
    'an approval answered with the request_id it announced (0.20.1 accepts the field and answers the oldest, which is that one)',
    async () => {
      const folder = endpoint.scratchFolder('by-request-id');
      const runId = await h.startRun({ input: 'Run the shell command: rm -rf ./by-request-id' });
      let announced: string | undefined;
      let reaction: Promise<AipActionResult> | undefined;
      const events = await h.invoke(
        { capability_id: h.cap('run_events'), input: { run_id: runId } },
        {
          onChunk: (chunk) => {
            if (chunk.kind !== 'pending_approval' || reaction !== undefined) return;
            announced = (chunk.data as { hermes_sse: { data: { request_id: string } } }).hermes_sse.data.request_id;
            const input = { run_id: runId, choice: 'once', request_id: announced };
            reaction = h.invoke({ capability_id: h.cap('run_approval'), input, idempotency_key: nextId('key') }, { approval: grantFor(input) });
          },
        },
      );
      const output = events.output as RunEventsOutput;
      const request = output.events.find((event) => event.event === 'approval.request');
      expect(request?.data).toMatchObject({ allow_session: true, request_id: expect.stringMatching(/^[0-9a-f]{32}$/) });
      // A Hermes that names the request it resolved (0.22) does so in approval.responded and in its answer alike.
      const responded = output.events.find((event) => event.event === 'approval.responded');
      const named = responded !== undefined && 'request_id' in responded.data ? { request_id: announced } : {};
      expect(responded?.data).toMatchObject({ choice: 'once', resolved: 1, ...named });
      expect((await reaction)?.output).toEqual({ object: 'hermes.run.approval_response', run_id: runId, choice: 'once', ...named, resolved: 1 });
      expect(events.status, JSON.stringify(events.error)).toBe('completed');
      expect(existsSync(folder)).toBe(false);
    },
  );

  test('an approval denied: the command is blocked, the folder stays, and the run still completes', async () => {
    const folder = endpoint.scratchFolder('deny-me');
    const runId = await h.startRun({ input: 'Run the shell command: rm -rf ./deny-me' });
    const { events, output, reaction } = await readEvents(runId, { kind: 'pending_approval', act: () => answer(runId, 'deny') });

    expect(reaction?.output).toEqual({ object: 'hermes.run.approval_response', run_id: runId, choice: 'deny', resolved: 1 });
    expect(events.status, JSON.stringify(events.error)).toBe('completed');
    expect(output.events.find((event) => event.event === 'approval.responded')?.data).toMatchObject({ choice: 'deny', resolved: 1 });
    expect(output.events.find((event) => event.event === 'tool.completed')?.data).toMatchObject({ tool: 'terminal', error: true });
    expect(output.terminal_event).toBe('run.completed');
    expect(existsSync(folder)).toBe(true);
  });

  test(
    'two runs sharing a session_id: answering one never resolves the other, whether they wait together or take turns',
    async () => {
      endpoint.scratchFolder('shared-a');
      endpoint.scratchFolder('shared-b');
      const sessionId = `shared-session-${version}`;
      const first = await h.startRun({ input: 'Run the shell command: rm -rf ./shared-a', session_id: sessionId });
      const second = await h.startRun({ input: 'Run the shell command: rm -rf ./shared-b', session_id: sessionId });
      await waitForStatus(first, 'waiting_for_approval');
      expect((await statusOf(first)).session_id).toBe(sessionId);

      if ((await approvalOrSilence(second)) === 'silence') {
        // The session takes turns (0.22's turn lease): the second waits, running and silent, for the first to end,
        // so an answer to it has nothing to resolve and must leave the first waiting.
        const early = await answer(second, 'deny');
        expect(early.error?.code).toBe(`${PREFIX}conflict`);
        expect(early.error?.details).toMatchObject({ remote_status: 409, provider_code: 'approval_not_pending' });
        expect((await statusOf(first)).status).toBe('waiting_for_approval');
        expect((await answer(first, 'once')).output).toMatchObject({ run_id: first, resolved: 1 });
        await waitForStatus(first, 'completed');
        await waitForStatus(second, 'waiting_for_approval');
      } else {
        expect((await answer(first, 'once')).output).toMatchObject({ run_id: first, resolved: 1 });
        await waitForStatus(first, 'completed');
        expect((await statusOf(second)).status).toBe('waiting_for_approval');
      }

      expect((await answer(second, 'deny')).output).toMatchObject({ run_id: second, choice: 'deny', resolved: 1 });
      await waitForStatus(second, 'completed');
      for (const runId of [first, second]) expect((await readEvents(runId)).output.terminal_event).toBe('run.completed');
    },
    2 * SCENARIO_TIMEOUT_MS,
  );

  test('a stop during a slow tool is followed to cancelled, and the command is interrupted', async () => {
    const runId = await h.startRun({ input: 'Run the shell command: sleep 30' });
    const { events, output, reaction } = await readEvents(runId, { kind: 'tool', act: () => stop(runId) });

    expect(reaction?.status, JSON.stringify(reaction?.error)).toBe('completed');
    expect(reaction?.output).toEqual({ run_id: runId, status: 'stopping' });
    expect(events.status, JSON.stringify(events.error)).toBe('cancelled');
    expect(events.error).toBeUndefined();
    expect(output.terminal_event).toBe('run.cancelled');
    // 0.18.2 cancels the wrapper at once (no tool.completed); 0.19.0 lets the tool end first.
    expect([
      ['tool.started', 'run.cancelled'],
      ['tool.started', 'tool.completed', 'run.cancelled'],
    ]).toContainEqual(names(output));
    await waitForStatus(runId, 'cancelled');
    await eventually(() => processesWorkingIn(endpoint.hermes.scratchDir).length === 0 || undefined, 'the interrupted command to exit', 500);
  });

  test('a stream cut after its first chunk is resumed after its seq where Hermes numbers events, else incomplete and reconciled; a second subscription replays or gets not_found', async () => {
    endpoint.scratchFolder('cut-me');
    const runId = await h.startRun({ input: 'Run the shell command: rm -rf ./cut-me' });
    endpoint.proxy.cutNextStreamAfterFirstFrame();
    // Where the read resumes, the run reaches its approval within it: denied as it comes.
    const { events, output, reaction } = await readEvents(runId, { kind: 'pending_approval', act: () => answer(runId, 'deny') });
    expect(output?.events[0]?.event, JSON.stringify(events.error)).toBe('tool.started');
    const seqs = output.events.map((event) => event.data['seq']);

    if (typeof seqs[0] === 'number') {
      // 0.22 numbers its events: the cut read resumed after seq 0 and got every later event once.
      expect(events.status, JSON.stringify(events.error)).toBe('completed');
      expect(output.resumed).toBe(1);
      expect(reaction?.status).toBe('completed');
      expect(seqs).toEqual(seqs.map((_, index) => index));
      expect(output.terminal_event).toBe('run.completed');
      // It keeps them: a later subscription replays them from the start, where 0.20.1 answered 404.
      const again = await h.invoke({ capability_id: h.cap('run_events'), input: { run_id: runId } });
      expect(again.status, JSON.stringify(again.error)).toBe('completed');
      expect((again.output as RunEventsOutput).events.map((event) => event.data['seq'])).toEqual(seqs);
      return;
    }
    expect(reaction).toBeUndefined();
    expect(events.status).toBe('failed');
    expect(events.error?.code).toBe(`${PREFIX}stream_incomplete`);
    expect(output.terminal).toBe(false);
    expect(names(output)).toEqual(['tool.started']);
    expect(output.reconciliation?.http_status).toBe(200);
    expect(output.reconciliation?.status).toMatchObject({ object: 'hermes.run', run_id: runId });
    expect(['running', 'waiting_for_approval']).toContain(output.reconciliation?.status?.['status']);

    // Once the run writes again, Hermes notices the vanished subscriber and drops the run's only queue.
    await waitForStatus(runId, 'waiting_for_approval');
    await answer(runId, 'deny');
    await waitForStatus(runId, 'completed');
    const again = await h.invoke({ capability_id: h.cap('run_events'), input: { run_id: runId } });
    expect(again.error?.code).toBe(`${PREFIX}not_found`);
    expect(again.error?.details?.remote_status).toBe(404);
  });

  test('the model echoes the endpoint key token by token: no delta, chunk, text or result holds it', async () => {
    const key = endpoint.hermes.apiKey;
    const runId = await h.startRun({ input: `Reply with the single word: ${key}` });
    const parts: string[] = [];
    const events = await h.invoke(
      { capability_id: h.cap('run_events'), input: { run_id: runId } },
      { onChunk: (chunk) => void parts.push(chunk.part?.type === 'text' ? chunk.part.text : '') },
    );
    const output = events.output as RunEventsOutput;
    const deltas = output.events.filter((event) => event.event === 'message.delta').map((event) => event.data.delta as string);
    expect(events.status, JSON.stringify(events.error)).toBe('completed');
    // Both releases stream the fake model's three pieces of the key as they are: the first delta
    // carries the placeholder, the others lose their pieces.
    expect(deltas).toEqual(['[REDACTED]', '', '']);
    expect(output.text).toBe('[REDACTED]');
    for (const piece of [...deltas, ...parts, output.text, JSON.stringify(events)]) expect(piece).not.toContain(key);
    // The deltas' chunks come first; later ones (run.completed's output) were redacted whole.
    expect(parts.slice(0, 3)).toEqual(['[REDACTED]', '', '']);
  });

  test('an unknown run id is not_found on status, events, approval and stop', async () => {
    const results = [
      await h.invoke({ capability_id: h.cap('run_status'), input: { run_id: UNKNOWN_RUN } }),
      await h.invoke({ capability_id: h.cap('run_events'), input: { run_id: UNKNOWN_RUN } }),
      await answer(UNKNOWN_RUN, 'once'),
      await stop(UNKNOWN_RUN),
    ];
    for (const result of results) {
      expect(result.error?.code).toBe(`${PREFIX}not_found`);
      expect(result.error?.details).toMatchObject({ remote_status: 404, provider_code: 'run_not_found' });
    }
  });

  test('a wrong key maps to authentication (401 invalid_api_key; gateway_auth_failed from 0.20.1)', async () => {
    const wrong = checkedConnector(createHermesConnector({ endpoints: [{ id: ENDPOINT, baseUrl: endpoint.proxy.url, apiKey: 'f'.repeat(64) }] }));
    try {
      const result = await wrong.invoke({ capability_id: wrong.cap('run_status'), input: { run_id: UNKNOWN_RUN } });
      expect(result.error).toMatchObject({ code: `${PREFIX}authentication`, category: 'auth', retryable: false });
      const providerCode = version === '0.18.2' || version === '0.19.0' ? 'invalid_api_key' : 'gateway_auth_failed';
      expect(result.error?.details).toMatchObject({ remote_status: 401, provider_code: providerCode });
    } finally {
      await wrong.connector.close();
    }
  });

  test("a body over Hermes' 10,000,000-byte limit maps to remote_rejected (413 body_too_large)", async () => {
    const large = checkedConnector(
      createHermesConnector({
        endpoints: [{ id: ENDPOINT, baseUrl: endpoint.proxy.url, apiKey: endpoint.hermes.apiKey }],
        limits: { maxRequestBodyBytes: 12 * MiB },
      }),
    );
    try {
      const result = await large.invoke({
        capability_id: large.cap('run_start'),
        input: { body: { input: 'x'.repeat(10_000_100) } },
        idempotency_key: nextId('key'),
      });
      expect(result.error).toMatchObject({ code: `${PREFIX}remote_rejected`, category: 'permanent', retryable: false });
      expect(result.error?.details).toMatchObject({ remote_status: 413, provider_code: 'body_too_large' });
    } finally {
      await large.connector.close();
    }
  });

  test('the same start replayed from the ledger returns the same run and never reaches Hermes twice', async () => {
    const input = { body: { input: 'Reply with the single word: ready' } };
    const key = nextId('key');
    const starts = () => endpoint.proxy.requests.filter((request) => request === 'POST /v1/runs').length;
    const before = starts();
    const first = await h.invoke({ capability_id: h.cap('run_start'), input, idempotency_key: key });
    const second = await h.invoke({ capability_id: h.cap('run_start'), input, idempotency_key: key });

    expect(first.status, JSON.stringify(first.error)).toBe('completed');
    expect(second.status, JSON.stringify(second.error)).toBe('completed');
    expect(second.output).toEqual(first.output);
    expect(second.receipt).toMatchObject({ replayed: true, original_action_id: first.action_id });
    expect(starts()).toBe(before + 1);
    const runId = (first.output as { run_id: string }).run_id;
    const { output } = await readEvents(runId);
    expect(output.terminal_event).toBe('run.completed');
    expect(output.text).toBe('ready');
  });
});

/** Processes whose working directory is `dir` (Hermes itself runs elsewhere), from /proc. */
function processesWorkingIn(dir: string): string[] {
  return readdirSync('/proc').filter((pid) => {
    try {
      return /^\d+$/.test(pid) && readlinkSync(`/proc/${pid}/cwd`) === dir;
    } catch {
      return false;
    }
  });
}
