/**
 * The Herm bridge against the two bundled simulators: Hermes (the runs) and Herm (the agent session).
 * Run: npm run build && npx tsx examples/herm-bridge.ts
 * docs/herm-bridge.md's code blocks are excerpts of this file, word for word
 * (test/examples/herm-bridge.test.ts checks that, and runs this file).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createHermBridge, createHermesConnector, createSqliteLedger, type HermBridgeOptions } from 'aip-connector-hermes-agent';
import { startHermSimulator, startHermesSimulator } from 'aip-connector-hermes-agent/simulator';

const hermes = await startHermesSimulator({ apiKey: 'hk_local_key' });
const herm = await startHermSimulator({ apiKey: 'herm_local_key' });
const endpoints = [{ id: 'local', baseUrl: hermes.url, apiKey: 'hk_local_key' }];
const endpointId = 'local';
const hermBaseUrl = herm.url;
const hermApiKey = 'herm_local_key';
const dir = mkdtempSync(join(tmpdir(), 'herm-bridge-'));
const ledgerPath = join(dir, 'ledger.db');
const sessionId = 'session_123';
const stop = new AbortController();

// Called when the run asks for approval; return null to approve nothing (Hermes then denies on its timeout).
const onApproval: HermBridgeOptions['onApproval'] = async ({ runId, event }) => {
  console.log(`approval requested for: ${String(event.command)}`);
  const now = Date.now();
  return {
    choice: 'once',
    grant: {
      approvalId: 'appr_demo_1',
      decision: 'approved',
      grantedAt: now,
      expiresAt: now + 10 * 60_000,
      evidence: {
        reason: 'approved by the on-call operator',
        inputSnapshot: { run_id: runId, choice: 'once' },
        policyDecision: { policy: 'demo', outcome: 'allow' },
      },
    },
  };
};

const ledger = createSqliteLedger({ path: ledgerPath });
const connector = createHermesConnector({ endpoints, ledger });
const bridge = createHermBridge({
  herm: { baseUrl: hermBaseUrl, apiKey: hermApiKey },
  connector,
  endpointId, // the connector endpoint that runs the work
  ledger, // the SAME durable ledger as the connector's: recover() needs both records
  onApproval, // optional: answer Hermes approval requests with an AIP grant
  bridgeId: process.env.HOSTNAME, // this replica's stable id: after a restart it takes its own jobs back at once
  // jobLeaseMs (default 30 s), context: { tenantId }, streamRoute: '/v1/sessions/{session_id}/stream',
  // finalRetry, statusPoll, maxRunMs (default 6 h), approvalTimeoutMs (default 300 s)
});
await bridge.recover(); // once at startup, before handling events: finishes what a previous process left
// The bridge reads the session stream (or call bridge.handleEvent(sessionId, event) from your own reader).
// It never rejects: a stream failure (Herm answering 503, …) ends it and goes to onError (default: the logger).
const subscribed = bridge.subscribe(sessionId, { signal: stop.signal, onError: (error) => console.error(`herm stream: ${error.message}`) });

while (herm.subscribers(sessionId) === 0) await new Promise((resolve) => setTimeout(resolve, 10));

// The agent calls the custom tool (the Herm simulator plays the agent). `sim_script` scripts the
// simulated Hermes run; a real Hermes ignores the field.
const call = herm.emitToolUse(sessionId, {
  name: 'hermes_run',
  input: {
    prompt: 'Render the intro video',
    sim_script: [
      { type: 'delta', text: 'Rendering…' },
      { type: 'approval', command: 'ffmpeg -i intro.mov intro.mp4', description: 'encode' },
      { type: 'tool', tool: 'terminal' },
      { type: 'complete', output: 'Render completed. The video is available at https://example.com/render/123.' },
    ],
  },
});

while (!['completed', 'failed'].includes(herm.toolCall(sessionId, call.tool_use_id)?.state ?? '')) {
  await new Promise((resolve) => setTimeout(resolve, 20));
}
await bridge.idle(); // every job this bridge started has posted its final result
stop.abort(); // ends the subscription
await subscribed; // resolves: it never rejects
await bridge.close();

for (const event of herm.accepted(sessionId)) console.log(`posted ${String(event.status)}: ${(event.content as Array<{ text: string }>)[0]?.text}`);
console.log(
  'history now:',
  herm.history(sessionId).map((event) => event.status),
);
const job = await ledger.job(sessionId, call.tool_use_id);
console.log(`job: run ${job?.run_id}, kickoff ${job?.kickoff}, ${job?.state}, final ${job?.final_status}`);

await connector.close();
await ledger.close();
await herm.close();
await hermes.close();
rmSync(dir, { recursive: true, force: true });
