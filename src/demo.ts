/**
 * `npm start`: a short end-to-end run against the embedded Hermes simulator on loopback.
 * Starts a run that asks for a dangerous-tool approval, follows its events live, answers the
 * approval with an AIP grant, then starts a second run and stops it.
 */
import { randomBytes } from 'node:crypto';
import { createHermesConnector } from './connector.js';
import { startHermesSimulator } from './simulator/index.js';
import type { AipActionResult, AipStreamChunk, ApprovalGrant, HermesConnector } from './types.js';

const ENDPOINT = 'demo';
const cap = (operation: string) => `cap:hermes_agent:${ENDPOINT}:${operation}`;

async function main(): Promise<void> {
  const apiKey = `hk_demo_${randomBytes(12).toString('hex')}`;
  const simulator = await startHermesSimulator({ apiKey, stepDelayMs: 20 });
  const connector = createHermesConnector({ endpoints: [{ id: ENDPOINT, baseUrl: simulator.url, apiKey }] });
  try {
    console.log(`Hermes simulator listening on ${simulator.url} (profile ${simulator.profile})\n`);
    await approvalLifecycle(connector);
    await stopLifecycle(connector);
  } finally {
    await connector.close();
    await simulator.close();
  }
}

async function approvalLifecycle(connector: HermesConnector): Promise<void> {
  console.log('1. run_start: a run whose agent wants to run `rm -rf ./scratch`');
  const start = await connector.invoke({
    id: 'act_demo_start',
    capability_id: cap('run_start'),
    input: { body: { input: 'Please run rm -rf ./scratch to clean up', session_id: 'demo-session' } },
    idempotency_key: 'demo-start-1',
  });
  const runId = runIdOf(start);

  console.log(`\n2. run_events for ${runId}, live:`);
  let approval: Promise<AipActionResult> | undefined;
  const events = await connector.invoke(
    { id: 'act_demo_events', capability_id: cap('run_events'), input: { run_id: runId } },
    {
      onChunk: (chunk) => {
        printChunk(chunk);
        if (chunk.kind === 'pending_approval') approval = approve(connector, runId);
      },
    },
  );
  if (approval) {
    const answered = await approval;
    console.log(`\n3. run_approval with an AIP grant: ${answered.status}`, JSON.stringify(answered.output));
  }
  console.log(`\n4. run_events result: ${events.status}, terminal ${(events.output as { terminal_event?: string }).terminal_event}`);
  const status = await connector.invoke({ id: 'act_demo_status', capability_id: cap('run_status'), input: { run_id: runId } });
  console.log('   run_status:', JSON.stringify(status.output));
}

async function stopLifecycle(connector: HermesConnector): Promise<void> {
  console.log('\n5. run_start a long run, then cancel() it (the host stops the run)');
  const start = await connector.invoke({
    id: 'act_demo_long',
    capability_id: cap('run_start'),
    input: { body: { input: 'long job', sim_script: [{ type: 'delta', text: 'working' }, { type: 'sleep', ms: 60_000 }, { type: 'complete' }] } },
    idempotency_key: 'demo-start-2',
  });
  const runId = runIdOf(start);
  const stopped = await connector.cancel({ id: 'act_demo_follow', capability_id: cap('run_events'), input: { run_id: runId } });
  console.log(`   run_stop: ${stopped?.status}`, JSON.stringify(stopped?.output));
  const status = await connector.invoke({ id: 'act_demo_status_2', capability_id: cap('run_status'), input: { run_id: runId } });
  console.log(`   run_status afterwards: ${(status.output as { status?: string }).status}`);
}

function approve(connector: HermesConnector, runId: string): Promise<AipActionResult> {
  const input = { run_id: runId, choice: 'once' };
  const now = Date.now();
  const grant: ApprovalGrant = {
    approvalId: 'appr_demo',
    decision: 'approved',
    grantedAt: now,
    expiresAt: now + 5 * 60_000,
    evidence: { reason: 'Scratch folder cleanup reviewed by the operator', inputSnapshot: input, policyDecision: { rule: 'demo-allow' } },
  };
  return connector.invoke({ id: 'act_demo_approval', capability_id: cap('run_approval'), input, idempotency_key: 'demo-approval-1' }, { approval: grant });
}

function runIdOf(result: AipActionResult): string {
  if (result.status !== 'completed') throw new Error(`run_start failed: ${result.error?.code} ${result.error?.message}`);
  const runId = (result.output as { run_id: string }).run_id;
  console.log(`   ${result.status}: run_id ${runId}`);
  return runId;
}

function printChunk(chunk: AipStreamChunk): void {
  const event = (chunk.data as { hermes_sse?: { event: string } }).hermes_sse?.event ?? '';
  console.log(`   #${chunk.sequence} ${chunk.kind.padEnd(16)} ${event.padEnd(20)} ${chunk.part?.type === 'text' ? chunk.part.text : ''}`);
}

main().catch((error: unknown) => {
  console.error(error instanceof Error ? error.message : error);
  process.exitCode = 1;
});
