/**
 * The host declares its provider-event channel in the manifest it serves when it publishes events
 * (the runtime's ingress accepts only declared channels), and only then: the field is otherwise
 * absent, as the reference re-serialises an empty list. The document stays a fixed point of the
 * reference type, so its digest is the one the runtime computes.
 */
import { describe, expect, it } from 'vitest';
import { createHermesConnector } from '../../../src/connector.js';
import { RUN_EVENTS_CHANNEL } from '../../../src/host/event-publisher.js';
import type { Principal } from '../../../src/host/wire/envelope.js';
import { bindManifestToHost, manifestDigest } from '../../../src/host/wire/manifest.js';
import { reserialize } from '../../../src/host/wire/reference-types.js';

const host: Principal = { id: 'agent:hermes-agent', kind: 'agent', trust_domain: 'connectors.test', did: 'did:key:zHost' };
const connector = createHermesConnector({ endpoints: [{ id: 'primary', baseUrl: 'http://127.0.0.1:1', apiKey: 'sk-primary' }] });

describe('the manifest channels of a host', () => {
  it('are absent when the host publishes no events', () => {
    expect(bindManifestToHost(connector.manifest(), host)).not.toHaveProperty('channels');
  });

  it('declare the run-events channel, as the reference re-serialises it, when the host publishes events', () => {
    const served = bindManifestToHost(connector.manifest(), host, [RUN_EVENTS_CHANNEL]);
    expect(served['channels']).toEqual([RUN_EVENTS_CHANNEL]);
    const again = reserialize.manifest(served);
    expect(again.ok && again.value).toEqual(served);
    expect(manifestDigest(served)).not.toBe(manifestDigest(bindManifestToHost(connector.manifest(), host)));
    expect(manifestDigest(served)).toBe(manifestDigest(bindManifestToHost(connector.manifest(), host, [RUN_EVENTS_CHANNEL])));
  });
});
