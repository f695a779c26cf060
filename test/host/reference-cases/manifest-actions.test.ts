/**
 * §3 "Manifest, health and actions": the bound manifest, /health, /ready, a sync action and
 * its response as the central side verifies it, a late cancel, async reaching the host as sync.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { reserialize } from '../../../src/host/wire/reference-types.js';
import { closeDeployments, getJson, runAction, runStartAction, startDeployment, type Deployment } from '../../helpers/aip-runtime/deployment-fixture.js';
import { expectSignedResult } from '../../helpers/aip-runtime/expectations.js';

describe('§3 manifest, health and actions', () => {
  let deployment: Deployment;
  let runId: string;

  beforeAll(async () => {
    deployment = await startDeployment();
  });
  afterAll(closeDeployments);

  it('manifest.decode: GET /aip/v1/manifest is 200 and decodes as Manifest', async () => {
    const manifest = await getJson(`${deployment.host.origin}/aip/v1/manifest`);
    expect(manifest.status).toBe(200);
    const decoded = reserialize.manifest(manifest.body);
    expect(decoded.ok, JSON.stringify(decoded)).toBe(true);
  });

  it('manifest.agent_matches_host: agent id and kind are the host principal, no agent.did', () => {
    const { agent } = deployment.host.manifest;
    const host = deployment.host.target.identity.principal;
    expect([agent.id, agent.kind]).toEqual([host.id, host.kind]);
    expect(agent).not.toHaveProperty('did');
  });

  it('health: GET /health is 200 with status ok', async () => {
    const health = await getJson(`${deployment.host.origin}/health`);
    expect(health.status).toBe(200);
    expect(health.body).toEqual({ status: 'ok', protocol: 'AIP', version: '1.0', service: 'aip-connector-host' });
  });

  it('ready: GET /ready is 200 with status ready and lease_valid not false', async () => {
    const ready = await getJson(`${deployment.host.origin}/ready`);
    expect(ready.status).toBe(200);
    expect(ready.body.status).toBe('ready');
    expect(ready.body.lease_valid).not.toBe(false);
  });

  it('action.sync.result: a 200 signed action_result for the action that passes verify_peer_response', async () => {
    const { dispatcher } = deployment.runtime;
    const outcome = await dispatcher.invoke(deployment.host.target, runStartAction({ input: 'hello from the runtime' }));
    const result = expectSignedResult(outcome);
    expect(result.status).toBe('completed');
    runId = (result.output as { run_id: string }).run_id;
    expect(deployment.simulator.run(runId)).toBeDefined();
  });

  it('action.sync.response_roundtrips_reference_serde: the raw response equals its reference re-serialisation', async () => {
    const outcome = await deployment.runtime.dispatcher.invoke(deployment.host.target, runAction('run_status', runId));
    const roundtrip = outcome.verdict.checks.find((check) => check.name === 'action.sync.response_roundtrips_reference_serde');
    expect(roundtrip, outcome.exchange.text).toEqual({ name: 'action.sync.response_roundtrips_reference_serde', ok: true });
    expect(expectSignedResult(outcome).status).toBe('completed');
  });

  it('cancel.late.action_result: a cancel of a completed action answers a signed action_result for it', async () => {
    const { dispatcher } = deployment.runtime;
    const action = runAction('run_status', runId);
    expectSignedResult(await dispatcher.invoke(deployment.host.target, action));
    const cancel = await dispatcher.cancel(deployment.host.target, action.id);
    expect(expectSignedResult(cancel).action_id).toBe(action.id);
  });

  it('action.async_as_sync.result: mode async reaches the host as sync and gets a 200 action_result', async () => {
    const prepared = deployment.runtime.dispatcher.prepareAction(deployment.host.target, runAction('run_status', runId, { mode: 'async' }));
    expect((prepared.envelope.body as any).action.mode).toBe('sync');
    expect(prepared.route?.original_mode).toBe('async');
    const exchange = await deployment.runtime.dispatcher.send(prepared);
    expectSignedResult({ prepared, exchange, verdict: deployment.runtime.dispatcher.verify(prepared, exchange) });
  });
});
