/** The connector's `eventTargets` and `delivery` options: validated before any I/O, refused with `invalid_delivery` and a clear message. */
import { describe, expect, it } from 'vitest';
import { ConnectorConfigError, createHermesConnector, createMemoryLedger, type HermesConnectorOptions } from 'aip-connector-hermes-agent';
import { DURABLE_BACKENDS } from '../helpers/ledgers.js';

const target = (id = 'receiver') => ({ id, maxBatch: 1, accepts: () => true, deliver: async () => ({ kind: 'delivered' as const }) });
const endpoints = [{ id: 'local', baseUrl: 'http://127.0.0.1:9' }];

function refusal(options: Partial<HermesConnectorOptions>): ConnectorConfigError {
  try {
    createHermesConnector({ endpoints, ...options } as HermesConnectorOptions);
  } catch (error) {
    if (error instanceof ConnectorConfigError) return error;
    throw error;
  }
  throw new Error('the options were accepted');
}

describe('delivery options', () => {
  it('refuses targets without the journal, since the outbox delivers its events', () => {
    const error = refusal({ ledger: createMemoryLedger(), eventTargets: [target()] });
    expect(error.code).toBe('invalid_delivery');
    expect(error.message).toMatch(/options\.journal/);
  });

  it('refuses two targets with one id, and a target that is not one', async () => {
    const { ledger } = await (DURABLE_BACKENDS[0] as (typeof DURABLE_BACKENDS)[number]).create();
    expect(refusal({ ledger, journal: {}, eventTargets: [target('a'), target('a')] })).toMatchObject({ code: 'invalid_delivery' });
    expect(refusal({ ledger, journal: {}, eventTargets: [{ ...target(), maxBatch: 0 }] }).message).toMatch(/maxBatch/);
    expect(refusal({ ledger, journal: {}, eventTargets: [{ ...target(), id: 'has space' }] }).message).toMatch(/eventTargets\[0\]\.id/);
    expect(refusal({ ledger, journal: {}, eventTargets: [{ id: 'x', maxBatch: 1 }] as never }).message).toMatch(/deliver/);
    expect(refusal({ ledger, journal: {}, eventTargets: 'receiver' as never }).code).toBe('invalid_delivery');
  });

  it('refuses delivery settings out of bounds or unknown, naming the field', async () => {
    const { ledger } = await (DURABLE_BACKENDS[0] as (typeof DURABLE_BACKENDS)[number]).create();
    const base = { ledger, journal: {}, eventTargets: [target()] };
    expect(refusal({ ...base, delivery: { maxPendingPerTarget: 0 } }).message).toBe('delivery.maxPendingPerTarget must be an integer from 1 to 1000000');
    expect(refusal({ ...base, delivery: { maxAgeMs: 1.5 } }).code).toBe('invalid_delivery');
    expect(refusal({ ...base, delivery: { retries: 3 } as never })).toMatchObject({ code: 'unknown_option' });
    expect(refusal({ ...base, delivery: [] as never }).code).toBe('invalid_delivery');
  });

  it('takes valid targets and settings, and answers deliveries() with [] when there are none', async () => {
    const { ledger } = await (DURABLE_BACKENDS[0] as (typeof DURABLE_BACKENDS)[number]).create();
    const connector = createHermesConnector({ endpoints, ledger, journal: {}, delivery: { maxAgeMs: 60_000 }, eventTargets: [target('a'), target('b')] });
    await connector.close();
    const plain = createHermesConnector({ endpoints });
    expect(await plain.deliveries()).toEqual([]);
    await plain.close();
  });
});
