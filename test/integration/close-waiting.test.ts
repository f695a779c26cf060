/**
 * close() ends every call at once, including one queued behind another replica's in-flight
 * claim of the same key (it would otherwise poll until its own deadline).
 */
import { describe, expect, it } from 'vitest';
import { createMemoryLedger } from 'aip-connector-hermes-agent';
import { fingerprintOf } from '../../src/ledger/idempotency.js';
import { harnessFactory, nextId } from '../helpers/harness.js';

const harness = harnessFactory();

describe('close() with a call waiting for a duplicate in flight', () => {
  it('the waiting call ends as cancelled (outcome uncertain) and close() settles without waiting for the deadline', async () => {
    const ledger = createMemoryLedger();
    const h = await harness({ connector: { ledger } });
    const key = nextId('key');
    const input = { body: { input: 'hi' } };
    const now = Date.now();
    // Another replica holds the key, alive for an hour.
    const claim = await ledger.claim({
      capability_id: h.cap('run_start'),
      idempotency_key: key,
      fingerprint: fingerprintOf(input),
      action_id: 'act_other_replica',
      owner: 'other-replica',
      now,
      lease_expires_at: now + 3_600_000,
      expires_at: now + 86_400_000,
    });
    expect(claim.claimed).toBe(true);

    const waiting = h.connector.invoke({ id: nextId(), capability_id: h.cap('run_start'), input, idempotency_key: key }, { deadline: now + 3_600_000 });
    await new Promise((resolve) => setTimeout(resolve, 100));
    const closedAt = Date.now();
    await h.connector.close();
    const result = await waiting;
    expect(Date.now() - closedAt).toBeLessThan(5_000);
    expect(result.status, JSON.stringify(result.error)).toBe('cancelled');
    expect(result.error).toMatchObject({ code: 'connector.hermes_agent.cancelled', details: { uncertain_outcome: true } });
    expect(h.sim.requests).toHaveLength(0);
  });
});
