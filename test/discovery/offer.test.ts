import { describe, expect, it } from 'vitest';
import { offerFromCapabilities } from '../../src/discovery/offer.js';

const READ_AT = 1_796_300_000_000;
const STEER_ROUTE = { method: 'POST', path: '/v1/runs/{run_id}/steer' };

function declaration(features: Record<string, unknown>, endpoints: Record<string, unknown> = { run_steer: STEER_ROUTE }): unknown {
  return { object: 'hermes.api_server.capabilities', features, endpoints };
}

describe('offerFromCapabilities: only what is declared in the expected shape is offered', () => {
  it("reads 0.22's declaration: durable run idempotency for 24 h and steer", () => {
    const offer = offerFromCapabilities(
      declaration({ runs_idempotency: { supported: true, durable: true, retention_seconds: 86400 }, run_steer: true }),
      READ_AT,
    );
    expect(offer).toEqual({ read_at: READ_AT, source: 'capabilities', durable_run_idempotency: { retention_seconds: 86400 }, run_steer: true });
  });

  it('idempotency that is supported but not durable offers no recovery (a restart would forget the key)', () => {
    const offer = offerFromCapabilities(declaration({ runs_idempotency: { supported: true, durable: false, retention_seconds: 86400 } }), READ_AT);
    expect(offer.durable_run_idempotency).toBeNull();
  });

  it('a durable declaration without a usable retention keeps the offer but no retention', () => {
    for (const retention of [undefined, 0, -5, '86400', Number.POSITIVE_INFINITY]) {
      const offer = offerFromCapabilities(declaration({ runs_idempotency: { supported: true, durable: true, retention_seconds: retention } }), READ_AT);
      expect(offer.durable_run_idempotency).toEqual({ retention_seconds: null });
    }
  });

  it('steer needs both the feature and its route', () => {
    expect(offerFromCapabilities(declaration({ run_steer: true }, {}), READ_AT).run_steer).toBe(false);
    expect(offerFromCapabilities(declaration({ run_steer: false }), READ_AT).run_steer).toBe(false);
    expect(offerFromCapabilities(declaration({ run_steer: true }, { run_steer: { method: 'GET', path: STEER_ROUTE.path } }), READ_AT).run_steer).toBe(false);
  });

  it("0.18.2's declaration (no idempotency block, no steer) and malformed documents offer nothing beyond the pin", () => {
    for (const document of [
      declaration({ run_submission: true, run_status: true }, {}),
      null,
      [],
      'text',
      { features: [] },
      { features: { runs_idempotency: [] } },
    ]) {
      expect(offerFromCapabilities(document, READ_AT)).toEqual({ read_at: READ_AT, source: 'capabilities', durable_run_idempotency: null, run_steer: false });
    }
  });
});
