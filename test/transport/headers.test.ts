import { describe, expect, it } from 'vitest';
import { buildHeaders, isValidIdempotencyKey, type HeaderSources } from '../../src/transport/headers.js';
import type { AipAction, ExecutionContext } from '../../src/types.js';
import { PACKAGE_VERSION, TEST_API_KEY, expectFailure, resolvedEndpoint } from '../helpers/fixtures.js';
import { providerKeyOf } from '../helpers/provider-key.js';

const DEADLINE = 1_800_000_123_456;

const fullContext = (): ExecutionContext => ({
  tenantId: 'tenant-a',
  actor: { principalId: 'usr_42', issuer: 'https://idp.example/realm' },
  traceId: '4bf92f3577b34da6a3ce929d0e0e4736',
  sessionId: 'ses_01HX',
  deadline: DEADLINE,
  signal: new AbortController().signal,
  onChunk: () => undefined,
});

const fullAction = (): AipAction => ({
  id: 'act_1',
  capability_id: 'cap:hermes_agent:ep1:run_start',
  input: { body: { input: 'hello' }, session_key: 'ignored-here' },
  idempotency_key: 'idem-123',
  delegation_chain: [{ principal_id: 'usr_42', scopes: ['runs:write'] }, { principal_id: 'agent_7' }],
});

function sources(overrides: Partial<HeaderSources> = {}): HeaderSources {
  return {
    endpoint: resolvedEndpoint({ tenantId: 'tenant-a' }),
    action: fullAction(),
    context: fullContext(),
    accept: 'application/json',
    hasBody: true,
    sessionKey: 'memory-scope-1',
    ...overrides,
  };
}

describe('buildHeaders with a full context', () => {
  it('sends exactly the documented headers with their values', () => {
    expect(buildHeaders(sources())).toStrictEqual({
      authorization: `Bearer ${TEST_API_KEY}`,
      'user-agent': `aip-connector-hermes-agent/${PACKAGE_VERSION}`,
      accept: 'application/json',
      'content-type': 'application/json',
      'idempotency-key': providerKeyOf('cap:hermes_agent:ep1:run_start', 'idem-123', 'tenant-a'),
      'x-hermes-session-key': 'memory-scope-1',
      'x-aip-principal-id': 'usr_42',
      'x-aip-authentication-issuer': 'https://idp.example/realm',
      'x-aip-tenant-id': 'tenant-a',
      'x-aip-trace-id': '4bf92f3577b34da6a3ce929d0e0e4736',
      'x-aip-correlation-id': '4bf92f3577b34da6a3ce929d0e0e4736',
      'x-aip-session-id': 'ses_01HX',
      'x-aip-deadline-unix-ms': String(DEADLINE),
      'x-aip-delegation-chain': '[{"principal_id":"usr_42","scopes":["runs:write"]},{"principal_id":"agent_7"}]',
    });
  });

  it('uses lower-case header names only', () => {
    for (const name of Object.keys(buildHeaders(sources()))) expect(name).toBe(name.toLowerCase());
  });

  it('user-agent carries the version from package.json', () => {
    expect(PACKAGE_VERSION).toMatch(/^\d+\.\d+\.\d+/);
    expect(buildHeaders(sources())['user-agent']).toBe(`aip-connector-hermes-agent/${PACKAGE_VERSION}`);
  });

  it('sends the trace id as both trace and correlation id', () => {
    const headers = buildHeaders(sources({ context: { traceId: 'trace-xyz' } }));
    expect(headers['x-aip-trace-id']).toBe('trace-xyz');
    expect(headers['x-aip-correlation-id']).toBe('trace-xyz');
  });

  it('sends the deadline as an integer of epoch milliseconds', () => {
    const headers = buildHeaders(sources({ context: { deadline: DEADLINE + 0.75 } }));
    expect(headers['x-aip-deadline-unix-ms']).toBe(String(DEADLINE));
    expect(headers['x-aip-deadline-unix-ms']).toMatch(/^\d+$/);
  });

  it('sends the event-stream accept header for streaming reads', () => {
    const headers = buildHeaders(sources({ accept: 'text/event-stream', hasBody: false }));
    expect(headers.accept).toBe('text/event-stream');
    expect(headers).not.toHaveProperty('content-type');
  });

  it('sends content-type only with a body', () => {
    expect(buildHeaders(sources({ hasBody: true }))['content-type']).toBe('application/json');
    expect(buildHeaders(sources({ hasBody: false }))).not.toHaveProperty('content-type');
  });

  it('escapes every non-ASCII character of the delegation chain as \\uXXXX and stays the same JSON', () => {
    const chain = [{ principal_id: 'usr_é', note: 'Zoë 😀 €', del: '\u007f' }];
    const headers = buildHeaders(sources({ action: { ...fullAction(), delegation_chain: chain } }));
    const value = headers['x-aip-delegation-chain'];
    expect(value).toBe('[{"principal_id":"usr_\\u00e9","note":"Zo\\u00eb \\ud83d\\ude00 \\u20ac","del":"\\u007f"}]');
    expect(value).toMatch(/^[\x20-\x7e]+$/);
    expect(JSON.parse(value ?? '')).toEqual(chain);
  });

  it('never reads a header from action.input', () => {
    const action = {
      ...fullAction(),
      input: { authorization: 'Bearer other', 'user-agent': 'x', 'idempotency-key': 'y', headers: { 'x-aip-tenant-id': 'evil' } },
    };
    const headers = buildHeaders(sources({ action, sessionKey: undefined }));
    expect(headers.authorization).toBe(`Bearer ${TEST_API_KEY}`);
    expect(headers['user-agent']).toBe(`aip-connector-hermes-agent/${PACKAGE_VERSION}`);
    expect(headers['idempotency-key']).toBe(providerKeyOf('cap:hermes_agent:ep1:run_start', 'idem-123', 'tenant-a'));
    expect(headers['x-aip-tenant-id']).toBe('tenant-a');
    expect(headers).not.toHaveProperty('x-hermes-session-key');
  });
});

describe('absent sources give absent headers', () => {
  it('sends only authorization, user-agent and accept for an empty context and bare action', () => {
    const action: AipAction = { id: 'act_1', capability_id: 'cap:hermes_agent:ep1:run_status', input: { run_id: 'r' } };
    expect(buildHeaders({ endpoint: resolvedEndpoint(), action, context: {}, accept: 'application/json', hasBody: false })).toStrictEqual({
      authorization: `Bearer ${TEST_API_KEY}`,
      'user-agent': `aip-connector-hermes-agent/${PACKAGE_VERSION}`,
      accept: 'application/json',
    });
  });

  it.each([
    ['idempotency-key', (s: HeaderSources) => ({ ...s, action: { ...s.action, idempotency_key: undefined } })],
    ['x-hermes-session-key', (s: HeaderSources) => ({ ...s, sessionKey: undefined })],
    ['x-aip-tenant-id', (s: HeaderSources) => ({ ...s, context: { ...s.context, tenantId: undefined } })],
    ['x-aip-session-id', (s: HeaderSources) => ({ ...s, context: { ...s.context, sessionId: undefined } })],
    ['x-aip-deadline-unix-ms', (s: HeaderSources) => ({ ...s, context: { ...s.context, deadline: undefined } })],
    ['x-aip-delegation-chain', (s: HeaderSources) => ({ ...s, action: { ...s.action, delegation_chain: undefined } })],
    ['x-aip-delegation-chain', (s: HeaderSources) => ({ ...s, action: { ...s.action, delegation_chain: [] } })],
  ])('drops %s when its source is absent', (header, change) => {
    const full = sources();
    expect(buildHeaders(full)).toHaveProperty(header);
    const headers = buildHeaders(change(full));
    expect(headers).not.toHaveProperty(header);
    expect(Object.keys(headers)).toHaveLength(Object.keys(buildHeaders(full)).length - 1);
  });

  it('drops both trace headers without a trace id', () => {
    const headers = buildHeaders(sources({ context: { ...fullContext(), traceId: undefined } }));
    expect(headers).not.toHaveProperty('x-aip-trace-id');
    expect(headers).not.toHaveProperty('x-aip-correlation-id');
  });

  it('drops principal and issuer headers without an actor', () => {
    const headers = buildHeaders(sources({ context: { ...fullContext(), actor: undefined } }));
    expect(headers).not.toHaveProperty('x-aip-principal-id');
    expect(headers).not.toHaveProperty('x-aip-authentication-issuer');
    expect(headers['x-aip-tenant-id']).toBe('tenant-a');
  });

  it('drops the issuer header for an actor without issuer and keeps the principal', () => {
    const headers = buildHeaders(sources({ context: { ...fullContext(), actor: { principalId: 'usr_1' } } }));
    expect(headers['x-aip-principal-id']).toBe('usr_1');
    expect(headers).not.toHaveProperty('x-aip-authentication-issuer');
  });
});

describe('bad header values are invalid_input', () => {
  const bad: Array<[string, string]> = [
    ['CR', 'a\rb'],
    ['LF', 'a\nb'],
    ['CRLF injection', 'a\r\nX-Evil: 1'],
    ['NUL', 'a\u0000b'],
    ['DEL', 'a\u007fb'],
    ['non-ASCII', 'tenant-é'],
    ['an emoji', 'id-😀'],
    ['a leading space', ' zq-canary'],
    ['a trailing space', 'zq-canary '],
    ['over 16 KiB', 'v'.repeat(16 * 1024 + 1)],
  ];

  const carriers: Array<[string, (value: string) => Partial<HeaderSources>]> = [
    ['session key', (value) => ({ sessionKey: value })],
    ['principal id', (value) => ({ context: { ...fullContext(), actor: { principalId: value } } })],
    ['issuer', (value) => ({ context: { ...fullContext(), actor: { principalId: 'usr_1', issuer: value } } })],
    ['tenant id', (value) => ({ context: { ...fullContext(), tenantId: value } })],
    ['trace id', (value) => ({ context: { ...fullContext(), traceId: value } })],
    ['session id', (value) => ({ context: { ...fullContext(), sessionId: value } })],
  ];

  for (const [carrier, place] of carriers) {
    it.each(bad)(`refuses a ${carrier} with %s`, (_name, value) => {
      const failure = expectFailure(() => buildHeaders(sources(place(value))), 'invalid_input');
      // The message names the header but never echoes the value.
      expect(failure.message).not.toContain(value);
    });
  }

  it('accepts a value of exactly 16 KiB with inner spaces', () => {
    const value = `a${' b'.repeat(8191)}c`.slice(0, 16 * 1024);
    expect(value).toHaveLength(16 * 1024);
    expect(buildHeaders(sources({ context: { traceId: value } }))['x-aip-trace-id']).toBe(value);
  });

  it('refuses a delegation chain whose JSON is over 16 KiB', () => {
    expectFailure(() => buildHeaders(sources({ action: { ...fullAction(), delegation_chain: [{ note: 'x'.repeat(16 * 1024) }] } })), 'invalid_input');
  });
});

describe('isValidIdempotencyKey', () => {
  it('accepts 1-255 visible ASCII characters only', () => {
    expect(isValidIdempotencyKey('a')).toBe(true);
    expect(isValidIdempotencyKey('~'.repeat(255))).toBe(true);
    expect(isValidIdempotencyKey('')).toBe(false);
    expect(isValidIdempotencyKey('a'.repeat(256))).toBe(false);
    expect(isValidIdempotencyKey('a b')).toBe(false);
    expect(isValidIdempotencyKey('é')).toBe(false);
  });
});
