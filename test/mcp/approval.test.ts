import type { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { describe, expect, it } from 'vitest';
import { createHermesConnector } from '../../src/index.js';
import { APPROVAL_WINDOW_MS, askForApproval } from '../../src/mcp/approval.js';
import { buildTools } from '../../src/mcp/tools.js';

const [stop] = buildTools(createHermesConnector({ endpoints: [{ id: 'prod', baseUrl: 'http://127.0.0.1:1', apiKey: 'k' }] }).capabilities()).filter(
  (tool) => tool.operation === 'run_stop',
);
const NOW = 1_800_000_000_000;

/** The part of the SDK Server that askForApproval uses, answering the form with `answer`. */
function fakeServer(answer: () => Promise<unknown>, capabilities: unknown = { elicitation: { form: {} } }): Server {
  return {
    getClientCapabilities: () => capabilities,
    getClientVersion: () => ({ name: 'desk', version: '1.2.3' }),
    elicitInput: answer,
  } as unknown as Server;
}

const ask = (server: Server) =>
  askForApproval({
    server,
    tool: stop as NonNullable<typeof stop>,
    input: { run_id: 'run_1' },
    principalId: 'user:ada',
    requestId: 7,
    signal: new AbortController().signal,
    now: () => NOW,
  });

describe('askForApproval', () => {
  it('turns an explicit approve into a fresh 15-minute grant whose snapshot is the input', async () => {
    const first = await ask(fakeServer(async () => ({ action: 'accept', content: { decision: 'approve', reason: '  runaway run  ' } })));
    const second = await ask(fakeServer(async () => ({ action: 'accept', content: { decision: 'approve', reason: 'again' } })));
    if (!first.approved || !second.approved) throw new Error('not approved');
    expect(first.grant).toMatchObject({
      decision: 'approved',
      grantedAt: NOW,
      expiresAt: NOW + APPROVAL_WINDOW_MS,
      evidence: {
        reason: 'runaway run',
        inputSnapshot: { run_id: 'run_1' },
        policyDecision: {
          policy: 'mcp_elicitation',
          method: 'elicitation/create',
          decided_by: 'user:ada',
          client: { name: 'desk', version: '1.2.3' },
          tool: 'hermes_prod_run_stop',
        },
      },
    });
    expect(APPROVAL_WINDOW_MS).toBe(15 * 60 * 1000);
    expect(first.grant.approvalId).toMatch(/^appr_[0-9a-f]{32}$/);
    expect(second.grant.approvalId).not.toBe(first.grant.approvalId);
  });

  it('refuses anything but an explicit approve with a reason', async () => {
    const outcomes = await Promise.all([
      ask(fakeServer(async () => ({ action: 'decline' }))),
      ask(fakeServer(async () => ({ action: 'cancel' }))),
      ask(fakeServer(async () => ({ action: 'accept', content: { decision: 'deny', reason: 'no' } }))),
      ask(fakeServer(async () => ({ action: 'accept', content: { decision: 'approve', reason: '   ' } }))),
      ask(fakeServer(async () => ({ action: 'accept' }))),
      ask(fakeServer(async () => Promise.reject(new Error('timed out')))),
      ask(fakeServer(async () => ({ action: 'accept', content: { decision: 'approve', reason: 'x' } }), {})),
    ]);
    expect(outcomes).toEqual([
      { approved: false, why: 'declined' },
      { approved: false, why: 'cancelled' },
      { approved: false, why: 'denied' },
      { approved: false, why: 'no_answer' },
      { approved: false, why: 'no_answer' },
      { approved: false, why: 'no_answer' },
      { approved: false, why: 'no_elicitation' },
    ]);
  });
});
