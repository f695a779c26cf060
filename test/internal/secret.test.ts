import { randomBytes } from 'node:crypto';
import { format, inspect } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { resolveConfig } from '../../src/config.js';
import { createHermesConnector } from '../../src/connector.js';
import { Secret } from '../../src/internal/secret.js';
import { LOCAL_BASE_URL } from '../helpers/fixtures.js';

const CANARY = `sk-canary-${randomBytes(12).toString('hex')}`;
const OTHER_CANARY = `sk-canary-${randomBytes(12).toString('hex')}`;

const connector = createHermesConnector({
  endpoints: [
    { id: 'primary', baseUrl: LOCAL_BASE_URL, apiKey: CANARY, displayName: 'Primary', tenantId: 'tenant-a' },
    { id: 'secondary', baseUrl: 'http://127.0.0.1:10', apiKey: OTHER_CANARY },
  ],
});

afterAll(async () => {
  await connector.close();
});

/** Every rendering a log line or an error report could use. */
function renderings(value: unknown): string[] {
  return [
    JSON.stringify(value) ?? '',
    inspect(value, { depth: Infinity }),
    inspect(value, { depth: Infinity, showHidden: true }),
    inspect(value, { depth: Infinity, showHidden: true, customInspect: false, getters: true }),
    format('%s %o %O %j', value, value, value, value),
  ];
}

function expectNoCanary(value: unknown): void {
  for (const text of renderings(value)) {
    expect(text).not.toContain(CANARY);
    expect(text).not.toContain(OTHER_CANARY);
    expect(text).not.toContain('sk-canary-');
  }
}

describe('the API key never leaks through serialization', () => {
  it('is absent from the connector object itself', () => {
    expectNoCanary(connector);
    expect(JSON.stringify(connector)).toBe('{"id":"hermes-agent"}');
  });

  it('is absent from manifest()', () => {
    const manifest = connector.manifest();
    expectNoCanary(manifest);
    // The manifest is still the real thing: it lists both endpoints.
    expect((manifest.compatibility as { endpoints: string[] }).endpoints).toEqual(['primary', 'secondary']);
  });

  it('is absent from capabilities() and every capability(id)', () => {
    const capabilities = connector.capabilities();
    expect(capabilities).toHaveLength(10);
    expectNoCanary(capabilities);
    for (const capability of capabilities) expectNoCanary(connector.capability(capability.id));
  });

  it('is absent from implementationSupport() answers', () => {
    for (const capability of connector.capabilities()) expectNoCanary(connector.implementationSupport(capability.id));
  });

  it('is absent from the resolved configuration, which holds the key as a Secret', () => {
    const config = resolveConfig({ endpoints: [{ id: 'x', baseUrl: LOCAL_BASE_URL, apiKey: CANARY }] });
    expect(config.endpoints[0]?.apiKey).toBeInstanceOf(Secret);
    expectNoCanary(config);
    expectNoCanary(config.endpoints);
  });
});

describe('Secret', () => {
  const secret = new Secret(CANARY);

  it('reveal() returns the value', () => {
    expect(secret.reveal()).toBe(CANARY);
  });

  it('JSON, string conversion and inspect print a placeholder', () => {
    expect(JSON.stringify(secret)).toBe('"[REDACTED]"');
    expect(JSON.stringify({ apiKey: secret })).toBe('{"apiKey":"[REDACTED]"}');
    expect(String(secret)).toBe('[REDACTED]');
    expect(`${secret}`).toBe('[REDACTED]');
    expect(inspect(secret)).toBe('Secret([REDACTED])');
    expect(inspect({ nested: { deeper: [secret] } }, { depth: Infinity })).toContain('Secret([REDACTED])');
  });

  it('never renders the value in any form, even without custom inspection', () => {
    expectNoCanary(secret);
    expectNoCanary({ nested: { deeper: [secret] } });
    expect(Object.keys(secret)).toEqual([]);
    expect(Object.getOwnPropertyNames(secret)).toEqual([]);
    expect(Object.getOwnPropertySymbols(secret)).toEqual([]);
  });

  it('survives structured cloning without the value', () => {
    const clone: unknown = structuredClone(secret);
    expect(JSON.stringify(clone)).not.toContain(CANARY);
  });
});
