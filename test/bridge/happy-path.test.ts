/**
 * The happy path: one custom tool call becomes exactly one Hermes run, answered `running` at
 * once and `completed` with the run's output when it ends, the completion replacing the
 * running result in Herm's history.
 */
import { describe, expect, it } from 'vitest';
import { applyToolUpdate } from 'aip-connector-hermes-agent';
import { eventually } from '../helpers/harness.js';
import { LEDGER_BACKENDS } from '../helpers/ledgers.js';
import { tapSession } from '../helpers/bridge-sse.js';
import {
  HERM_KEY,
  HERMES_KEY,
  TOOL_NAME,
  acceptedFinals,
  acceptedRunning,
  bridgeEnvFactory,
  callTool,
  hermesStarts,
  newSessionId,
  postedResults,
  scripts,
  textOf,
} from '../helpers/bridge-env.js';

const startEnv = bridgeEnvFactory();
const OUTPUT = 'Render completed. The video is available at https://example.com/render/123.';

describe.each(LEDGER_BACKENDS)('the Herm bridge, happy path ($name ledger)', (backend) => {
  it('starts one Hermes run, posts running then completed with the same tool_use_id, and records the job', async () => {
    const store = await backend.create();
    const env = await startEnv({ ledger: store.ledger });
    const { herm, hermes, bridge, ledger } = env;
    const sessionId = newSessionId();
    const tap = await tapSession(herm.url, HERM_KEY, sessionId);
    try {
      await eventually(() => herm.subscribers(sessionId) === 1, 'the UI tap subscribed');
      const use = callTool(herm, sessionId, {
        prompt: 'Render the intro video',
        instructions: 'Be brief.',
        session_id: 'hermes-sess-1',
        sim_script: scripts.quick(OUTPUT),
      });
      expect(use.type).toBe('agent.custom_tool_use');

      const job = await bridge.handleEvent(sessionId, use);
      expect(job).not.toBeNull();
      const runId = job?.run_id as string;
      expect(runId).toMatch(/\S/);

      // Exactly one Hermes run, with the tool input mapped to the run body.
      expect(hermes.startCount()).toBe(1);
      const starts = hermesStarts(hermes);
      expect(starts).toHaveLength(1);
      expect(starts[0]?.body).toMatchObject({ input: 'Render the intro video', instructions: 'Be brief.', session_id: 'hermes-sess-1' });
      expect(starts[0]?.headers['idempotency-key']).toEqual(expect.any(String));

      // The kickoff was accepted before handleEvent resolved: running, not an error, naming the run.
      const running = acceptedRunning(herm, sessionId, use.tool_use_id);
      expect(running).toHaveLength(1);
      expect(running[0]).toMatchObject({ type: 'user.custom_tool_result', tool_use_id: use.tool_use_id, status: 'running', is_error: false });
      expect(textOf(running[0] as Record<string, unknown>)).toContain(runId);
      const historyWithRunning = herm.history(sessionId);
      expect(historyWithRunning).toEqual(running);

      await bridge.idle();

      // The final result: completed, the run's output, the same tool_use_id, after the running one.
      const accepted = herm.accepted(sessionId);
      expect(accepted.map((event) => event.status)).toEqual(['running', 'completed']);
      const finals = acceptedFinals(herm, sessionId, use.tool_use_id);
      expect(finals).toHaveLength(1);
      const final = finals[0] as Record<string, unknown>;
      expect(final).toMatchObject({ type: 'user.custom_tool_result', tool_use_id: use.tool_use_id, status: 'completed', is_error: false });
      expect(textOf(final)).toBe(OUTPUT);

      // The completion replaced the running result: one history entry for the call, one continuation.
      const history = herm.history(sessionId);
      expect(history).toHaveLength(1);
      expect(history[0]).toEqual(final);
      expect(herm.toolCall(sessionId, use.tool_use_id)).toEqual({
        session_id: sessionId,
        tool_use_id: use.tool_use_id,
        state: 'completed',
        running_event_id: running[0]?.id,
        final_event_id: final.id,
      });
      expect(herm.continuations(sessionId, use.tool_use_id)).toBe(1);

      // Exactly two POSTs: running, then completed.
      expect(postedResults(herm, sessionId).map((posted) => posted.status)).toEqual(['running', 'completed']);

      // The job record.
      const record = await ledger.job(sessionId, use.tool_use_id);
      expect(record).toMatchObject({
        session_id: sessionId,
        tool_use_id: use.tool_use_id,
        tool_name: TOOL_NAME,
        tool_input: use.input,
        run_id: runId,
        state: 'done',
        kickoff: 'accepted',
        kickoff_event_id: running[0]?.id,
        final_status: 'completed',
        final_event_id: final.id,
      });
      expect(record?.updated_at).toBeGreaterThanOrEqual(record?.created_at as number);
      expect(await ledger.unfinishedJobs()).toEqual([]);

      // Credentials: Herm got its x-api-key and never the Hermes key; Hermes never got the Herm key.
      for (const request of herm.requests) {
        expect(request.headers['x-api-key']).toBe(HERM_KEY);
        expect(request.headers.authorization).toBeUndefined();
        expect(JSON.stringify(request)).not.toContain(HERMES_KEY);
      }
      for (const request of hermes.requests) {
        expect(request.headers['x-api-key']).toBeUndefined();
        expect(request.headers.authorization).toBe(`Bearer ${HERMES_KEY}`);
        expect(JSON.stringify(request)).not.toContain(HERM_KEY);
      }

      // The live UI: the session.tool_updated frame patches the snapshot's running row with Herm's final
      // content, and the row keeps its id (Herm's own history holds the final under its new id).
      const frame = await eventually(() => tap.frames.find((item) => item.data.type === 'session.tool_updated'), 'session.tool_updated on the stream');
      expect(frame.event).toBe('session.tool_updated');
      expect(frame.data.payload).toMatchObject({ tool_use_id: use.tool_use_id, event_id: running[0]?.id, payload: final });
      const patchedRow = { ...final, id: record?.kickoff_event_id };
      expect(history).toEqual([final]);
      expect(applyToolUpdate(historyWithRunning, frame.data)).toEqual([patchedRow]);
      // The same from the 202: the accepted final event, as it comes.
      expect(applyToolUpdate(historyWithRunning, final)).toEqual([patchedRow]);
      expect(historyWithRunning).toEqual(running);
    } finally {
      tap.close();
    }
  });
});
