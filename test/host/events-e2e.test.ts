/**
 * Run events end to end over AIP: the built `hermes-aip host`, started with AIP_CONNECTOR_HOST_EVENT_ENDPOINT
 * pointing at the runtime double's event ingress (its registry fed by the control plane's registrations and
 * leases, the channel admitted from the manifest the host serves), publishes the events of a run a signed
 * run_start started. The ingress accepts every batch, and stores the journal's events (kinds, order, count);
 * an accepted envelope replayed as sent is accepted again, and the same envelope tampered with is refused.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { HermesSseEvent, RunEventsOutput } from '../../src/contract/aip.js';
import {
  closeDeployments,
  hermesOf,
  runAction,
  startRuntime,
  startSimulator,
  waitForReady,
  type Deployment,
} from '../helpers/aip-runtime/deployment-fixture.js';
import { expectSignedResult, startRunThroughHost } from '../helpers/aip-runtime/expectations.js';
import { launchHost } from '../helpers/aip-runtime/launcher.js';
import { script } from '../helpers/harness.js';
import { PG_URL } from '../helpers/ledgers.js';
import { createPgSchemaOn, type PgSchema } from '../helpers/pg-schema.js';

interface StoredEvent {
  kind: string;
  data: { run_id: string; sequence: number; hermes: HermesSseEvent };
}

const post = (url: string, body: string) => fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body });

const LEDGERS = PG_URL ? ['SQLite', 'PostgreSQL'] : ['SQLite'];

describe.each(LEDGERS)('hermes-aip host on %s publishing run events to the runtime', { timeout: 60_000 }, (ledgerName) => {
  let deployment: Deployment;
  let runId: string;
  let journaled: HermesSseEvent[];
  let schema: PgSchema | undefined;

  beforeAll(async () => {
    schema = ledgerName === 'PostgreSQL' ? await createPgSchemaOn(PG_URL!, 'host_events') : undefined;
    const simulator = await startSimulator();
    const runtime = await startRuntime();
    const settings = { EVENT_ENDPOINT: runtime.events.url, EVENT_ALLOW_HTTP: 'true', EVENT_ALLOW_PRIVATE: 'true' };
    const ledger = schema ? ({ kind: 'postgres', connectionString: schema.connectionString } as const) : undefined;
    const host = await launchHost({ runtime, hermes: hermesOf(simulator), settings, ...(ledger ? { ledger } : {}) });
    await waitForReady(host, 200);
    await runtime.admitted();
    deployment = { runtime, simulator, host };
    runId = await startRunThroughHost(deployment, { input: 'publish', sim_script: script.quick('published') });
    const read = await deployment.runtime.dispatcher.invoke(host.target, runAction('run_events', runId));
    journaled = (expectSignedResult(read).output as RunEventsOutput).events;
  });
  afterAll(async () => {
    await closeDeployments();
    await schema?.drop();
  });

  const storedOfRun = () =>
    [...deployment.runtime.events.stored.values()].map((event) => event as unknown as StoredEvent).filter((event) => event.data.run_id === runId);

  it('accepts every batch, and holds the journal’s events in order', async () => {
    expect(journaled.map((event) => event.event)).toEqual(deployment.simulator.run(runId)?.events.map((event) => event['event']));
    await expect.poll(() => storedOfRun().length, { timeout: 20_000 }).toBe(journaled.length);
    const { records } = deployment.runtime.events;
    expect(records.length).toBeGreaterThan(0);
    expect(records.map((record) => [record.status, record.code])).toEqual(records.map(() => [200, undefined]));
    const stored = storedOfRun();
    expect(stored.map((event) => event.kind)).toEqual(journaled.map((event) => `hermes.${event.event}`));
    expect(stored.map((event) => event.data.sequence)).toEqual(journaled.map((_, index) => index + 1));
    expect(stored.map((event) => event.data.hermes.event)).toEqual(journaled.map((event) => event.event));
    expect(stored.map((event) => event.data.hermes.data)).toEqual(journaled.map((event) => event.data));
  });

  it('accepts an accepted envelope replayed as sent, and refuses it tampered with', async () => {
    const { events } = deployment.runtime;
    const sent = events.records.find((record) => record.status === 200)!.text;
    const before = structuredClone([...events.stored.entries()]);

    expect((await post(events.url, sent)).status).toBe(200);
    const tampered = sent.replace(/"run_id":"(run_[0-9a-f]+)"/, '"run_id":"$1x"');
    expect(tampered).not.toBe(sent);
    const refused = await post(events.url, tampered);
    expect(refused.status).toBe(401);
    expect(events.records.at(-1)).toMatchObject({ status: 401, code: 'connector_event.not_authorized', problem: 'signature does not verify' });
    expect([...events.stored.entries()]).toEqual(before);
  });
});
