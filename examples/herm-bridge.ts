/**
 * The Herm bridge against the two bundled simulators: Hermes (the runs) and Herm (the agent session).
 * Run: npm run build && npx tsx examples/herm-bridge.ts
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createHermBridge, createHermesConnector, createSqliteLedger } from 'aip-connector-hermes-agent';
import { startHermSimulator, startHermesSimulator } from 'aip-connector-hermes-agent/simulator';

const hermes = await startHermesSimulator({ apiKey: 'hk_local_key' });
const herm = await startHermSimulator({ apiKey: 'herm_local_key' });

// ONE durable ledger for the connector and the bridge: recover() after a restart reads both records.
const dir = mkdtempSync(join(tmpdir(), 'herm-bridge-'));
const ledger = createSqliteLedger({ path: join(dir, 'ledger.db') });
const connector = createHermesConnector({ endpoints: [{ id: 'local', baseUrl: hermes.url, apiKey: 'hk_local_key' }], ledger });
const bridge = createHermBridge({
  herm: { baseUrl: herm.url, apiKey: 'herm_local_key' },
  connector,
  endpointId: 'local',
  ledger,
  // Called when the run asks for approval; return null to approve nothing (Hermes then denies on its timeout).
  onApproval: async ({ runId, event }) => {
    console.log(`approval requested for: ${String(event.command)}`);
    const now = Date.now();
    return {
      choice: 'once',
      grant: {
        approvalId: 'appr_demo_1',
        decision: 'approved',
        grantedAt: now,
        expiresAt: now + 10 * 60_000,
        evidence: { reason: 'approved by the on-call operator', inputSnapshot: { run_id: runId, choice: 'once' }, policyDecision: { policy: 'demo', outcome: 'allow' } },
      },
    };
  },
});

await bridge.recover(); // at startup, before handling events: finishes what a previous process left

const sessionId = 'session_123';
const stop = new AbortController();
const subscribed = bridge.subscribe(sessionId, { signal: stop.signal });
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
await bridge.idle();
for (const event of herm.accepted(sessionId)) console.log(`posted ${String(event.status)}: ${(event.content as Array<{ text: string }>)[0]?.text}`);
console.log('history now:', herm.history(sessionId).map((event) => event.status));
const job = await ledger.job(sessionId, call.tool_use_id);
console.log(`job: run ${job?.run_id}, kickoff ${job?.kickoff}, ${job?.state}, final ${job?.final_status}`);

stop.abort();
await subscribed;
await bridge.close();
await connector.close();
await ledger.close();
await herm.close();
await hermes.close();
rmSync(dir, { recursive: true, force: true });
