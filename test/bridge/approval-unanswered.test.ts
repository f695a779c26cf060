/**
 * An onApproval that never answers. The bridge waits for it at most the approval's window
 * (`approvalTimeoutMs`, default Hermes' own approval timeout, never past the job's deadline),
 * sends nothing afterwards (a late answer could release another pending approval of the run),
 * keeps following the run and posts a failed final result when it ends; close() settles.
 */
import { describe, expect, it } from 'vitest';
import type { HermApprovalDecision } from 'aip-connector-hermes-agent';
import type { RunStep } from 'aip-connector-hermes-agent/simulator';
import { eventually, grantFor, script } from '../helpers/harness.js';
import { bridgeEnvFactory, callTool, hermesRunRequests, newSessionId, oneFailedFinal, postedResults } from '../helpers/bridge-env.js';

const startEnv = bridgeEnvFactory();
const COMMAND = 'rm -rf ./render-cache';
const never = () => new Promise<never>(() => undefined);

describe('an onApproval that never answers', () => {
  it('is bounded by approvalTimeoutMs: the run ends in Hermes, one failed final result says the approval went unanswered, close() settles', async () => {
    const { herm, hermes, bridge, ledger } = await startEnv({ hermes: { approvalTimeoutMs: 100 }, bridge: { onApproval: never, approvalTimeoutMs: 150 } });
    const sessionId = newSessionId();
    const use = callTool(herm, sessionId, { prompt: 'Clean the render cache', sim_script: script.approval(COMMAND) as RunStep[] });
    const job = await bridge.handleEvent(sessionId, use);
    const runId = job?.run_id as string;
    await bridge.idle();

    expect(hermes.run(runId)?.status).toBe('completed');
    expect(hermesRunRequests(hermes, runId, '/approval')).toHaveLength(0);
    const text = oneFailedFinal(herm, sessionId, use.tool_use_id);
    expect(text).toContain(runId);
    expect(text).toMatch(/not answered within 0\.15 s/);
    expect(postedResults(herm, sessionId).map((posted) => posted.status)).toEqual(['running', 'failed']);
    expect(await ledger.job(sessionId, use.tool_use_id)).toMatchObject({ state: 'done', final_status: 'failed' });
    await bridge.close();
  });

  it('the wait never outlasts the job: maxRunMs bounds it when it is shorter than approvalTimeoutMs', async () => {
    const { herm, hermes, bridge } = await startEnv({ hermes: { approvalTimeoutMs: 100 }, bridge: { onApproval: never, maxRunMs: 2_000 } });
    const sessionId = newSessionId();
    const use = callTool(herm, sessionId, { prompt: 'Clean the render cache', sim_script: script.approval(COMMAND) as RunStep[] });
    const job = await bridge.handleEvent(sessionId, use);
    await bridge.idle();
    expect(hermesRunRequests(hermes, job?.run_id as string, '/approval')).toHaveLength(0);
    expect(oneFailedFinal(herm, sessionId, use.tool_use_id)).toMatch(/not answered within \d(\.\d+)? s/);
  });

  it('an answer that comes after the window is never sent to Hermes', async () => {
    let answer!: (decision: HermApprovalDecision) => void;
    let runId = '';
    const { herm, hermes, bridge } = await startEnv({
      hermes: { approvalTimeoutMs: 100 },
      bridge: {
        approvalTimeoutMs: 50,
        onApproval: (request) => {
          runId = request.runId;
          return new Promise<HermApprovalDecision>((resolve) => (answer = resolve));
        },
      },
    });
    const sessionId = newSessionId();
    const use = callTool(herm, sessionId, { prompt: 'Clean the render cache', sim_script: script.approval(COMMAND) as RunStep[] });
    await bridge.handleEvent(sessionId, use);
    await bridge.idle();
    answer({ choice: 'once', grant: grantFor({ run_id: runId, choice: 'once' }) });
    await new Promise((resolve) => setTimeout(resolve, 50));
    await bridge.idle();
    expect(hermesRunRequests(hermes, runId, '/approval')).toHaveLength(0);
    oneFailedFinal(herm, sessionId, use.tool_use_id);
  });

  it('close() during the wait settles at once; the job is left to recover()', async () => {
    const { herm, hermes, bridge, ledger } = await startEnv({ bridge: { onApproval: never } });
    const sessionId = newSessionId();
    const use = callTool(herm, sessionId, { prompt: 'Clean the render cache', sim_script: script.approval(COMMAND) as RunStep[] });
    const job = await bridge.handleEvent(sessionId, use);
    await eventually(() => hermes.run(job?.run_id as string)?.status === 'waiting_for_approval', 'the run waits for approval');
    await bridge.close();
    expect(postedResults(herm, sessionId).map((posted) => posted.status)).toEqual(['running']);
    expect((await ledger.job(sessionId, use.tool_use_id))?.state).toBe('running');
  });
});
