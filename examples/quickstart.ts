/**
 * The README's "As a library" code, against the bundled simulator.
 * Run: npm run build && npx tsx examples/quickstart.ts
 * test/examples/docs-code.test.ts checks that every ```ts block of the docs stands in an example word
 * for word; test/examples/quickstart.test.ts runs this one.
 */
import { createHermesConnector } from 'aip-connector-hermes-agent';
import { startHermesSimulator } from 'aip-connector-hermes-agent/simulator';

process.env.HERMES_API_KEY ??= 'hk_quickstart_key';
const hermes = await startHermesSimulator({ apiKey: process.env.HERMES_API_KEY });
const baseUrl = hermes.url;

const connector = createHermesConnector({
  endpoints: [{ id: 'prod', baseUrl, apiKey: process.env.HERMES_API_KEY, tenantId: 'tenant-a' }],
});

const started = await connector.invoke(
  { id: 'act_1', capability_id: 'cap:hermes_agent:prod:run_start', input: { body: { input: 'Summarize the incident.' } }, idempotency_key: 'incident-42' },
  { tenantId: 'tenant-a', actor: { principalId: 'user:ada' }, traceId: 'trace-1' },
);
if (started.status === 'completed') {
  const { run_id } = started.output as { run_id: string };
  const events = await connector.invoke(
    { id: 'act_2', capability_id: 'cap:hermes_agent:prod:run_events', input: { run_id } },
    { tenantId: 'tenant-a', onChunk: (chunk) => console.log(chunk.kind, chunk.part?.type === 'text' ? chunk.part.text : '') },
  );
  console.log(events.status, (events.output as { text: string }).text);
}
await connector.close();

await hermes.close();
