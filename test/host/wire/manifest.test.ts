import { createHash } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { createHermesConnector } from '../../../src/connector.js';
import type { Principal } from '../../../src/host/wire/envelope.js';
import { canonicalJson, wireJson } from '../../../src/host/wire/json.js';
import { bindManifestToHost, manifestDigest } from '../../../src/host/wire/manifest.js';
import { reserialize } from '../../../src/host/wire/reference-types.js';

const SEED = 20261202;
const host: Principal = { id: 'service:connector:hermes', kind: 'service', trust_domain: 'connectors.test', did: 'did:key:zHost' };
const connector = createHermesConnector({
  endpoints: [
    { id: 'primary', baseUrl: 'http://127.0.0.1:1', apiKey: 'sk-primary', tenantId: 'tenant-acme' },
    { id: 'second', baseUrl: 'http://127.0.0.1:2', apiKey: 'sk-second' },
  ],
});
const served = bindManifestToHost(connector.manifest(), host);

/** The same JSON with the keys of every object in a random order. */
function shuffled(value: unknown, random: () => number): unknown {
  if (Array.isArray(value)) return value.map((item) => shuffled(item, random));
  if (value === null || typeof value !== 'object') return value;
  const entries = Object.entries(value).map(([key, item]) => [key, shuffled(item, random)] as const);
  for (let i = entries.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [entries[i], entries[j]] = [entries[j]!, entries[i]!];
  }
  return Object.fromEntries(entries);
}

/** Every path to a string, number or boolean. */
function leafPaths(value: unknown, path: Array<string | number> = []): Array<Array<string | number>> {
  if (Array.isArray(value)) return value.flatMap((item, i) => leafPaths(item, [...path, i]));
  if (value !== null && typeof value === 'object') return Object.entries(value).flatMap(([key, item]) => leafPaths(item, [...path, key]));
  return value === null ? [] : [path];
}

function withLeafChanged(value: unknown, path: Array<string | number>): unknown {
  const copy = structuredClone(value) as Record<string | number, unknown>;
  let parent = copy;
  for (const key of path.slice(0, -1)) parent = parent[key] as Record<string | number, unknown>;
  const last = path.at(-1)!;
  const leaf = parent[last];
  parent[last] = typeof leaf === 'string' ? `${leaf}x` : typeof leaf === 'number' ? leaf + 1 : !leaf;
  return copy;
}

function digestOrRefusal(manifest: unknown): string {
  try {
    return manifestDigest(manifest as object);
  } catch (error) {
    return `refused: ${(error as Error).message}`;
  }
}

describe('bindManifestToHost', () => {
  it('binds the agent to the host principal without its DID and advertises aip.native.http.v1 with its compatibility paths', () => {
    expect(served['agent']).toEqual({ id: host.id, kind: host.kind, trust_domain: host.trust_domain });
    expect(served['profiles']).toEqual([...connector.manifest().profiles, 'aip.native.http.v1']);
    expect(served['compatibility']).toMatchObject({ native_http: { messages: '/aip/v1/messages', manifest: '/aip/v1/manifest' } });
    expect(bindManifestToHost(served, host)).toEqual(served);
  });

  it('is a fixed point of the reference Manifest type, byte for byte', () => {
    const typed = reserialize.manifest(served);
    if (!typed.ok) throw new Error(typed.reason);
    expect(wireJson(typed.tree)).toBe(wireJson(served));
    expect((served['capabilities'] as unknown[]).length).toBe(connector.manifest().capabilities.length);
  });

  it('refuses a manifest the reference type refuses', () => {
    expect(() => bindManifestToHost({ ...connector.manifest(), capabilities: [{ id: 'cap:x' }] }, host)).toThrow(TypeError);
  });
});

describe('manifestDigest', () => {
  it('is sha256 over the canonical JSON of the re-serialised manifest, whatever the source key order or omitted defaults', () => {
    expect(manifestDigest(served)).toBe(`sha256:${createHash('sha256').update(canonicalJson(served)).digest('hex')}`);
    expect(manifestDigest(served)).toMatch(/^sha256:[0-9a-f]{64}$/);
    const withoutDefaults = JSON.parse(JSON.stringify(served), (key, value) => (key === 'minimum_distinct_principals' ? undefined : value));
    expect(manifestDigest(withoutDefaults)).toBe(manifestDigest(served));
  });

  it('is stable under key reordering at every depth', () => {
    fc.assert(
      fc.property(fc.integer(), (seed) => {
        let state = seed >>> 0;
        const random = () => (state = (state * 1664525 + 1013904223) >>> 0) / 2 ** 32;
        expect(manifestDigest(shuffled(served, random) as object)).toBe(manifestDigest(served));
      }),
      { seed: SEED, numRuns: 50 },
    );
  });

  it('changes with any value change', () => {
    const paths = leafPaths(served);
    const original = manifestDigest(served);
    fc.assert(
      fc.property(fc.nat({ max: paths.length - 1 }), (index) => {
        expect(digestOrRefusal(withLeafChanged(served, paths[index]!))).not.toBe(original);
      }),
      { seed: SEED, numRuns: 300 },
    );
  });
});
