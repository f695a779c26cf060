/**
 * docs/simulator.md's code: the bundled Hermes simulator, a fault and a restart.
 * Run: npm run build && npx tsx examples/simulator.ts
 */
import { createHermesConnector } from 'aip-connector-hermes-agent';
import { startHermesSimulator } from 'aip-connector-hermes-agent/simulator';

const sim = await startHermesSimulator({ apiKey: 'hk_local_key', profile: 'pin' }); // or 'v0.19', 'v0.20', 'v0.22', 'later'
sim.injectFault({ route: 'status', response: { status: 503 } }); // the next status read answers 503
sim.restart(); // a Hermes restart: every run is forgotten

const connector = createHermesConnector({ endpoints: [{ id: 'local', baseUrl: sim.url, apiKey: 'hk_local_key' }] });
const status = (id: string) => connector.invoke({ id, capability_id: 'cap:hermes_agent:local:run_status', input: { run_id: 'run_unknown' } });
console.log((await status('act_1')).error?.code, (await status('act_2')).error?.code, sim.requests.length, sim.runs().length);
await connector.close();
await sim.close();
