/**
 * run_steer (issue 32, item 7), the opt-in sixth operation: published only for an endpoint configured
 * with `operations: { run_steer: true }`, contracted as run_approval is (approval grant and idempotency
 * key required), and sent only where the endpoint declares `run_steer` in GET /v1/capabilities (the
 * simulator's `v0.22` profile does; `v0.20` serves no declaration).
 */
import { describe, expect, it } from 'vitest';
import { ConnectorConfigError, createHermesConnector, type RunEventsOutput } from 'aip-connector-hermes-agent';
import { API_KEY, ENDPOINT, grantFor, harnessFactory, nextId, script, type Harness } from '../helpers/harness.js';

const PREFIX = 'connector.hermes_agent.';
const UNKNOWN_RUN = `run_${'0'.repeat(32)}`;
const STEER_PATH = /^\/v1\/runs\/[^/]+\/steer$/;

const harness = harnessFactory({ simulator: { profile: 'v0.22' }, endpoint: { operations: { run_steer: true } } });

function steer(h: Harness, runId: string, text = 'Prefer the smaller change.', grant = true) {
  const input = { run_id: runId, input: text };
  return h.invoke({ capability_id: h.cap('run_steer'), input, idempotency_key: nextId('key') }, grant ? { approval: grantFor(input) } : {});
}

const steerRequests = (h: Harness) => h.sim.requests.filter((request) => request.method === 'POST' && STEER_PATH.test(request.path));

describe('run_steer is published only where configured', () => {
  it('is not in the manifest by default: five capabilities per endpoint', async () => {
    const h = await harness({ endpoint: { operations: {} } });
    expect(h.connector.manifest().capabilities.map((capability) => capability.id)).toEqual(
      ['run_start', 'run_status', 'run_events', 'run_approval', 'run_stop'].map((operation) => h.cap(operation)),
    );
    expect(h.connector.manifest().compatibility).toMatchObject({ operations: ['run_start', 'run_status', 'run_events', 'run_approval', 'run_stop'] });
    const result = await steer(h, UNKNOWN_RUN);
    expect(result.error?.code).toBe(`${PREFIX}unsupported_capability`);
    expect(steerRequests(h)).toEqual([]);
  });

  it('is the sixth capability where configured, contracted as run_approval is', async () => {
    const h = await harness();
    const capability = h.connector.capability(h.cap('run_steer'));
    expect(h.connector.manifest().capabilities).toHaveLength(6);
    expect((h.connector.manifest().compatibility as { operations: string[] }).operations).toContain('run_steer');
    expect(capability).toMatchObject({ risk: 'medium', requires_human_approval: true });
    expect(capability?.bindings[0]).toMatchObject({ endpoint_id: ENDPOINT, operation: 'run_steer', method: 'POST', path: '/v1/runs/{run_id}/steer' });
    expect(capability?.contract).toMatchObject({ side_effects: ['read', 'write', 'external_network'], idempotency: { requirement: 'required' } });
  });

  it.each([
    ['an array', []],
    ['an unknown operation', { run_delete: true }],
    ['a non-boolean', { run_steer: 'yes' }],
  ])('refuses operations given as %s with invalid_operations', (_what, operations) => {
    const create = () =>
      createHermesConnector({ endpoints: [{ id: ENDPOINT, baseUrl: 'http://127.0.0.1:9', apiKey: API_KEY, operations: operations as never }] });
    expect(create).toThrow(ConnectorConfigError);
    expect(create).toThrow(expect.objectContaining({ code: 'invalid_operations' }));
  });
});

describe('run_steer against an endpoint that declares it (v0.22)', () => {
  it('steers a running run: Hermes accepts it, the run goes on and its events carry run.steered', async () => {
    const h = await harness();
    const runId = await h.startRun({ input: 'work', sim_script: script.long() });
    const result = await steer(h, runId);
    expect(result.status, JSON.stringify(result.error)).toBe('completed');
    expect(result.output).toEqual({ object: 'hermes.run.steer', run_id: runId, accepted: true });
    expect(JSON.parse(steerRequests(h)[0]?.body ?? '{}')).toEqual({ input: 'Prefer the smaller change.' });
    expect(await h.invoke({ capability_id: h.cap('run_status'), input: { run_id: runId } })).toMatchObject({
      output: { status: 'running', last_event: 'run.steered' },
    });
    await h.cancel({ capability_id: h.cap('run_events'), input: { run_id: runId } });
    const events = await h.invoke({ capability_id: h.cap('run_events'), input: { run_id: runId } });
    const output = events.output as RunEventsOutput;
    expect(output.events.find((event) => event.event === 'run.steered')?.data).toMatchObject({ accepted: true });
    expect(output.terminal_event).toBe('run.cancelled');
  });

  it('needs an AIP approval grant and an idempotency key, refused before Hermes', async () => {
    const h = await harness();
    const runId = await h.startRun({ input: 'work', sim_script: script.long() });
    const withoutGrant = await steer(h, runId, 'Stop early.', false);
    expect(withoutGrant.error?.code).toBe(`${PREFIX}approval_required`);
    const input = { run_id: runId, input: 'Stop early.' };
    const withoutKey = await h.invoke({ capability_id: h.cap('run_steer'), input }, { approval: grantFor(input) });
    expect(withoutKey.error?.code).toBe(`${PREFIX}idempotency_key_required`);
    const blank = await steer(h, runId, '   ');
    expect(blank.error?.code).toBe(`${PREFIX}invalid_input`);
    expect(steerRequests(h)).toEqual([]);
  });

  it("maps Hermes' refusals: a finished run is conflict (409 run_not_accepting_steer), an unknown one not_found", async () => {
    const h = await harness();
    const runId = await h.startRun({ input: 'ready', sim_script: [{ type: 'complete', output: 'ready' }] });
    await h.invoke({ capability_id: h.cap('run_events'), input: { run_id: runId } });
    const finished = await steer(h, runId);
    expect(finished.error?.code).toBe(`${PREFIX}conflict`);
    expect(finished.error?.details).toMatchObject({ remote_status: 409, provider_code: 'run_not_accepting_steer' });
    const unknown = await steer(h, UNKNOWN_RUN);
    expect(unknown.error?.code).toBe(`${PREFIX}not_found`);
    expect(unknown.error?.details).toMatchObject({ remote_status: 404 });
  });
});

describe('run_steer against an endpoint that does not declare it (the pin: Hermes 0.18.2)', () => {
  it('is refused as unsupported_capability without sending the steer', async () => {
    const h = await harness({ simulator: { profile: 'pin' } });
    const runId = await h.startRun({ input: 'work', sim_script: script.long() });
    const result = await steer(h, runId);
    expect(result.status).toBe('failed');
    expect(result.error).toMatchObject({ code: `${PREFIX}unsupported_capability`, category: 'permanent', retryable: false });
    expect(result.error?.details).toMatchObject({ operation: 'run_steer', offer_source: 'capabilities' });
    expect(result.error?.details?.remote_status).toBeUndefined();
    expect(steerRequests(h)).toEqual([]);
    expect(h.sim.requests.filter((request) => request.path === '/v1/capabilities')).toHaveLength(1);
  });
});
