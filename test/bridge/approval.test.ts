/**
 * Approvals. When the run asks (approval.request), the bridge calls onApproval once; an answer
 * with a grant becomes exactly one governed run_approval. Without a handler, or with no answer,
 * nothing is approved: Hermes denies on its own timeout, and the final result still arrives.
 */
import { describe, expect, it } from 'vitest';
import type { HermApprovalDecision, HermApprovalRequest } from 'aip-connector-hermes-agent';
import { grantFor, script } from '../helpers/harness.js';
import { acceptedFinals, bridgeEnvFactory, callTool, hermesRunRequests, newSessionId, postedResults } from '../helpers/bridge-env.js';
import type { RunStep } from 'aip-connector-hermes-agent/simulator';

const startEnv = bridgeEnvFactory();
const COMMAND = 'rm -rf ./render-cache';

/** The tool.completed event of the run's terminal tool step: whether Hermes ran it approved. */
function toolErrored(events: Array<Record<string, unknown>>): unknown {
  const completed = events.filter((event) => event.event === 'tool.completed');
  return completed[completed.length - 1]?.error;
}

describe('approvals through onApproval', () => {
  it('answered once with a grant: one POST …/approval {"choice":"once"}, the run completes, the final is completed', async () => {
    const requests: HermApprovalRequest[] = [];
    const { herm, hermes, bridge, ledger } = await startEnv({
      bridge: {
        onApproval: async (request): Promise<HermApprovalDecision> => {
          requests.push(structuredClone(request));
          return { choice: 'once', grant: grantFor({ run_id: request.runId, choice: 'once' }) };
        },
      },
    });
    const sessionId = newSessionId();
    const use = callTool(herm, sessionId, { prompt: 'Clean the render cache', sim_script: script.approval(COMMAND) as RunStep[] });
    const job = await bridge.handleEvent(sessionId, use);
    const runId = job?.run_id as string;
    await bridge.idle();

    expect(requests).toHaveLength(1);
    expect(requests[0]).toMatchObject({ sessionId, toolUseId: use.tool_use_id, runId });
    expect(requests[0]?.event.command).toBe(COMMAND);

    const posts = hermesRunRequests(hermes, runId, '/approval');
    expect(posts).toHaveLength(1);
    expect(JSON.parse(posts[0]?.body as string)).toEqual({ choice: 'once' });
    expect(posts[0]?.headers['idempotency-key']).toEqual(expect.any(String));

    const run = hermes.run(runId);
    expect(run?.status).toBe('completed');
    expect(run?.events.map((event) => event.event)).toContain('approval.responded');
    expect(toolErrored(run?.events ?? [])).toBe(false);

    expect(postedResults(herm, sessionId).map((posted) => posted.status)).toEqual(['running', 'completed']);
    const finals = acceptedFinals(herm, sessionId, use.tool_use_id);
    expect(finals).toHaveLength(1);
    expect(finals[0]).toMatchObject({ status: 'completed', is_error: false, content: [{ type: 'text', text: 'Removed.' }] });
    expect(herm.continuations(sessionId, use.tool_use_id)).toBe(1);
    expect(await ledger.job(sessionId, use.tool_use_id)).toMatchObject({ state: 'done', final_status: 'completed' });
  });

  it('with no onApproval handler nothing is approved; Hermes denies on its timeout and the final still arrives', async () => {
    const { herm, hermes, bridge, ledger } = await startEnv({ hermes: { approvalTimeoutMs: 100 } });
    const sessionId = newSessionId();
    const use = callTool(herm, sessionId, { prompt: 'Clean the render cache', sim_script: script.approval(COMMAND) as RunStep[] });
    const job = await bridge.handleEvent(sessionId, use);
    const runId = job?.run_id as string;
    await bridge.idle();

    expect(hermesRunRequests(hermes, runId, '/approval')).toHaveLength(0);
    const run = hermes.run(runId);
    expect(run?.events.map((event) => event.event)).toContain('approval.request');
    expect(toolErrored(run?.events ?? [])).toBe(true);
    const finals = acceptedFinals(herm, sessionId, use.tool_use_id);
    expect(finals).toHaveLength(1);
    expect(herm.continuations(sessionId, use.tool_use_id)).toBe(1);
    expect((await ledger.job(sessionId, use.tool_use_id))?.state).toBe('done');
  });

  it.each([
    ['returns null', () => null],
    ['returns undefined', () => undefined],
    [
      'throws',
      () => {
        throw new Error('approver unreachable');
      },
    ],
  ])('onApproval %s: no approval POST, and the final still arrives', async (_, answer) => {
    let calls = 0;
    const { herm, hermes, bridge } = await startEnv({
      hermes: { approvalTimeoutMs: 100 },
      bridge: {
        onApproval: () => {
          calls += 1;
          return answer();
        },
      },
    });
    const sessionId = newSessionId();
    const use = callTool(herm, sessionId, { prompt: 'Clean the render cache', sim_script: script.approval(COMMAND) as RunStep[] });
    const job = await bridge.handleEvent(sessionId, use);
    await bridge.idle();
    expect(calls).toBe(1);
    expect(hermesRunRequests(hermes, job?.run_id as string, '/approval')).toHaveLength(0);
    expect(toolErrored(hermes.run(job?.run_id as string)?.events ?? [])).toBe(true);
    expect(acceptedFinals(herm, sessionId, use.tool_use_id)).toHaveLength(1);
  });

  it('a grant that does not authorize the answer is refused by the connector: nothing reaches Hermes', async () => {
    const { herm, hermes, bridge } = await startEnv({
      hermes: { approvalTimeoutMs: 100 },
      // The grant covers `session`, the answer says `always`.
      bridge: { onApproval: ({ runId }) => ({ choice: 'always', grant: grantFor({ run_id: runId, choice: 'session' }) }) },
    });
    const sessionId = newSessionId();
    const use = callTool(herm, sessionId, { prompt: 'Clean the render cache', sim_script: script.approval(COMMAND) as RunStep[] });
    const job = await bridge.handleEvent(sessionId, use);
    await bridge.idle();
    expect(hermesRunRequests(hermes, job?.run_id as string, '/approval')).toHaveLength(0);
    expect(toolErrored(hermes.run(job?.run_id as string)?.events ?? [])).toBe(true);
    expect(acceptedFinals(herm, sessionId, use.tool_use_id)).toHaveLength(1);
  });

  it('a deny answer is sent as {"choice":"deny"} and the run goes on without the command', async () => {
    const { herm, hermes, bridge } = await startEnv({
      bridge: { onApproval: ({ runId }) => ({ choice: 'deny', grant: grantFor({ run_id: runId, choice: 'deny' }) }) },
    });
    const sessionId = newSessionId();
    const use = callTool(herm, sessionId, { prompt: 'Clean the render cache', sim_script: script.approval(COMMAND) as RunStep[] });
    const job = await bridge.handleEvent(sessionId, use);
    await bridge.idle();
    const posts = hermesRunRequests(hermes, job?.run_id as string, '/approval');
    expect(posts.map((post) => JSON.parse(post.body) as unknown)).toEqual([{ choice: 'deny' }]);
    expect(toolErrored(hermes.run(job?.run_id as string)?.events ?? [])).toBe(true);
    expect(acceptedFinals(herm, sessionId, use.tool_use_id)).toHaveLength(1);
  });
});
