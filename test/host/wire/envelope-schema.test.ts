import { describe, expect, it } from 'vitest';
import { checkEnvelope } from '../../../src/host/wire/envelope-schema.js';
import { parseWire, wireJson } from '../../../src/host/wire/json.js';
import { loadVectors } from './vectors.js';

const request = loadVectors().find((vector) => vector.name === 'native.request.approved_action')!;

function parsed(text: string): unknown {
  const result = parseWire(text);
  if ('error' in result) throw new Error(result.error);
  return result.tree;
}

/** The vector request with `edit` applied to its plain JSON, as a parsed tree. */
function edited(edit: (envelope: any) => void): unknown {
  const envelope = JSON.parse(request.documentText);
  edit(envelope);
  return parsed(JSON.stringify(envelope));
}

/** The vector request with one raw text replacement (to write lexemes JSON.stringify cannot). */
function replaced(from: string, to: string): unknown {
  expect(request.documentText).toContain(from);
  return parsed(request.documentText.replace(from, to));
}

describe('checkEnvelope', () => {
  it('accepts the reference request and returns its re-serialisation', () => {
    const result = checkEnvelope(parsed(request.documentText));
    if (!result.ok) throw new Error(result.message);
    expect(wireJson(result.envelope.tree)).toBe(request.documentText);
  });

  it.each([
    ['not an envelope', parsed('{"hello":"world"}')],
    ['not an object', parsed('[1]')],
    ['aip_version other than 1.0', edited((e) => (e.aip_version = '2.0'))],
    ['unknown message type', edited((e) => (e.message_type = 'aip.core.v1.nope'))],
    ['unknown top-level field', edited((e) => (e.extra = 1))],
    ['unknown field in the action', edited((e) => (e.body.action.extra = 1))],
    ['unknown field in the sender', edited((e) => (e.from.extra = 1))],
    ['missing action input', edited((e) => delete e.body.action.input)],
    ['empty body', edited((e) => (e.body = {}))],
    ['two body variants', edited((e) => (e.body.cancel = { target: { action: 'act_1' } }))],
    ['unknown body variant', edited((e) => (e.body = { nope: {} }))],
    ['sender kind not a principal kind', edited((e) => (e.from.kind = 'robot'))],
    ['negative timeout', edited((e) => (e.body.action.timeout_ms = -1))],
    ['fractional timeout', edited((e) => (e.body.action.timeout_ms = 1.5))],
    ['sent_at not a string', edited((e) => (e.sent_at = 1))],
    ['unknown field in a decision', edited((e) => (e.body.action.approval.extra = true))],
  ])('%s → schema.envelope.invalid', (_label, body) => {
    expect(checkEnvelope(body)).toMatchObject({ ok: false, code: 'schema.envelope.invalid' });
  });

  it.each([
    ['sent_at not RFC 3339', edited((e) => (e.sent_at = 'yesterday'))],
    ['decided_at not RFC 3339', edited((e) => (e.body.action.approval.decided_at = '2026-13-01T00:00:00Z'))],
    ['timeout written as a float', replaced('"capability_id":"cap:probe:echo",', '"capability_id":"cap:probe:echo","timeout_ms":1000.0,')],
    ['timeout out of u64 range', replaced('"capability_id":"cap:probe:echo",', '"capability_id":"cap:probe:echo","timeout_ms":18446744073709551616,')],
  ])('%s → envelope.decode.invalid', (_label, body) => {
    expect(checkEnvelope(body)).toMatchObject({ ok: false, code: 'envelope.decode.invalid' });
  });

  it('lets free-form and optional fields through: null options, any security, unknown keys inside input', () => {
    for (const body of [
      edited((e) => (e.trace = null)),
      edited((e) => (e.security.extra = { anything: [1, 2] })),
      edited((e) => (e.body.action.input = { deep: { unknown: true } })),
      edited((e) => (e.body = { cancel: { target: { session: 'sess_1' } } })),
    ]) {
      expect(checkEnvelope(body).ok).toBe(true);
    }
  });
});
