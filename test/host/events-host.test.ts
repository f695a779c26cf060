/**
 * `hermes-aip host` with AIP_CONNECTOR_HOST_EVENT_ENDPOINT: it starts (its connector takes the AIP
 * event target, with the run journal on), registers, and serves a manifest declaring the run-events
 * channel the target publishes on, under the digest it registered.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RUN_EVENTS_CHANNEL } from '../../src/host/event-publisher.js';
import { closeDeployments, type Deployment, getJson, startDeployment } from '../helpers/aip-runtime/deployment-fixture.js';

describe('hermes-aip host publishing provider events', { timeout: 60_000 }, () => {
  let deployment: Deployment;

  beforeAll(async () => {
    deployment = await startDeployment({
      settings: { EVENT_ENDPOINT: 'http://127.0.0.1:9/aip/v1/connector-events', EVENT_ALLOW_HTTP: 'true', EVENT_ALLOW_PRIVATE: 'true' },
    });
  });
  afterAll(closeDeployments);

  it('serves a manifest declaring the run-events channel, and registered its digest', async () => {
    const { status, body } = await getJson(`${deployment.host.origin}/aip/v1/manifest`);
    expect(status).toBe(200);
    expect(body.channels).toEqual([RUN_EVENTS_CHANNEL]);
    const registration = deployment.runtime.control.records.find((record) => record.operation === 'register' && record.status === 200);
    expect(registration?.request?.command.payload['manifest_digest']).toBe(deployment.host.target.manifestDigest);
  });
});
