/**
 * createHermBridge validates its options before any I/O and throws ConnectorConfigError
 * `invalid_options` naming the option; a minimal valid configuration is accepted.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { ConnectorConfigError, createHermBridge, createHermesConnector, createMemoryLedger, type HermBridgeOptions } from 'aip-connector-hermes-agent';

const connector = createHermesConnector({ endpoints: [{ id: 'local', baseUrl: 'http://127.0.0.1:9', apiKey: 'hk_test_key_0123456789abcdef' }] });
afterAll(() => connector.close());

const valid = (): HermBridgeOptions => ({ herm: { baseUrl: 'http://127.0.0.1:9', apiKey: 'herm_sk_test' }, connector, endpointId: 'local' });

function refusal(options: unknown): string {
  try {
    createHermBridge(options as HermBridgeOptions);
  } catch (error) {
    expect(error).toBeInstanceOf(ConnectorConfigError);
    expect((error as ConnectorConfigError).code).toBe('invalid_options');
    return (error as Error).message;
  }
  throw new Error('the options were accepted');
}

describe('createHermBridge options', () => {
  it('accepts a minimal configuration and one with every lease option', async () => {
    await createHermBridge(valid()).close();
    const ledger = createMemoryLedger();
    await createHermBridge({ ...valid(), ledger, bridgeId: 'replica-1', jobLeaseMs: 100 }).close();
    await createHermBridge({ ...valid(), jobLeaseMs: 86_400_000, approvalTimeoutMs: 1 }).close();
    await ledger.close();
  });

  it.each([
    ['no connector', { connector: undefined }, /connector/],
    ['an endpoint the connector does not have', { endpointId: 'elsewhere' }, /endpointId/],
    ['a Herm base URL that does not parse', { herm: { baseUrl: 'not a url', apiKey: 'k' } }, /herm\.baseUrl/],
    ['a Herm base URL with a path', { herm: { baseUrl: 'http://127.0.0.1:9/api', apiKey: 'k' } }, /herm\.baseUrl/],
    ['a Herm key with a space', { herm: { baseUrl: 'http://127.0.0.1:9', apiKey: 'a b' } }, /herm\.apiKey/],
    ['a stream route without {session_id}', { streamRoute: '/v1/stream' }, /streamRoute/],
    ['a ledger that is not a RunLedger', { ledger: { job: () => null } }, /ledger/],
    ['an empty bridgeId', { bridgeId: '' }, /bridgeId/],
    ['a bridgeId with a space', { bridgeId: 'replica 1' }, /bridgeId/],
    ['a jobLeaseMs under 100', { jobLeaseMs: 99 }, /jobLeaseMs/],
    ['a jobLeaseMs that is not an integer', { jobLeaseMs: 1000.5 }, /jobLeaseMs/],
    ['a jobLeaseMs over a day', { jobLeaseMs: 86_400_001 }, /jobLeaseMs/],
    ['an approvalTimeoutMs of 0', { approvalTimeoutMs: 0 }, /approvalTimeoutMs/],
    ['an approvalTimeoutMs that is not an integer', { approvalTimeoutMs: 1.5 }, /approvalTimeoutMs/],
    ['an approvalTimeoutMs over a day', { approvalTimeoutMs: 86_400_001 }, /approvalTimeoutMs/],
  ])('refuses %s', (_name, change, names) => {
    expect(refusal({ ...valid(), ...change })).toMatch(names);
  });
});
