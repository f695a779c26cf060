/**
 * Hostile input to the message path: random edits of a valid signed action (a value replaced, a
 * member removed or added anywhere in the envelope), and random bytes. The handler never rejects,
 * answers only with the reference host's statuses, signs every answer after decoding (a fixed point
 * of the reference types), and executes only what is still validly signed by the gateway.
 */
import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import { canonicalJson, parseWire } from '../../src/host/wire/json.js';
import { reserialize } from '../../src/host/wire/reference-types.js';
import { actionEnvelope, actionId, cap, type HostUnderTest, roundTrips, signed, startHost } from './messages-support.js';

const STATUSES = new Set([200, 400, 401, 403, 409, 415, 429, 502, 503]);

let host: HostUnderTest;
beforeAll(async () => {
  host = await startHost();
});

/** The canonical form of what the reference types keep of an envelope text. */
function typedCanonical(text: string): string | undefined {
  const parsed = parseWire(text);
  if ('error' in parsed) return undefined;
  const typed = reserialize.envelope(parsed.tree);
  return typed.ok ? canonicalJson(typed.tree) : undefined;
}

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

const anyJson: fc.Arbitrary<Json> = fc.oneof(
  fc.constant(null),
  fc.boolean(),
  fc.integer(),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  fc.string({ maxLength: 8 }),
  fc.constant([] as Json[]),
  fc.constant({} as Record<string, Json>),
);

/** Every path to a value in the tree. */
function paths(value: Json, at: string[] = []): string[][] {
  if (value === null || typeof value !== 'object') return [at];
  const keys = Array.isArray(value) ? value.map((_, index) => String(index)) : Object.keys(value);
  return [at, ...keys.flatMap((key) => paths((value as Record<string, Json>)[key] as Json, [...at, key]))];
}

/** The tree with `at` replaced by `replacement` (undefined: removed), or a member `extra` added there when it is an object. */
function edited(tree: Json, at: string[], replacement: Json | undefined, extra?: string): Json {
  if (at.length === 0) {
    if (extra !== undefined && tree !== null && typeof tree === 'object' && !Array.isArray(tree)) return { ...tree, [extra]: replacement ?? null };
    return replacement ?? null;
  }
  const [head, ...rest] = at as [string, ...string[]];
  if (Array.isArray(tree)) return tree.map((item, index) => (String(index) === head ? edited(item, rest, replacement, extra) : item));
  const object = tree as Record<string, Json>;
  const copy = { ...object };
  const next = edited(object[head] as Json, rest, replacement, extra);
  if (rest.length === 0 && replacement === undefined && extra === undefined) delete copy[head];
  else copy[head] = next;
  return copy;
}

describe('random edits of a signed action', () => {
  it('never reject, answer only reference statuses, sign what they answer after decoding, and execute only intact messages', async () => {
    const base = () => signed(actionEnvelope(host, { id: actionId(), capability_id: cap('run_status'), input: { run_id: 'run_gone' } }));
    const tree = JSON.parse(base()) as Json;
    const allPaths = paths(tree);
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...allPaths),
        fc.option(anyJson, { nil: undefined }),
        fc.option(fc.string({ maxLength: 6 }), { nil: undefined }),
        async (at, value, extra) => {
          const original = base();
          const text = JSON.stringify(edited(JSON.parse(original) as Json, at, value, extra));
          const answer = await host.handler.handle({ body: Buffer.from(text), headers: { 'content-type': 'application/json' } });
          expect(STATUSES.has(answer.status)).toBe(true);
          if (answer.status !== 400) expect(roundTrips(answer.body)).toBe(true);
          // Only an edit the reference types do not see (a no-op once re-serialised) can execute.
          if (answer.status === 200) expect(typedCanonical(text)).toBe(typedCanonical(original));
        },
      ),
      { numRuns: 150 },
    );
  });

  it('random bytes never crash the handler: 400 (not JSON, or not an envelope)', async () => {
    await fc.assert(
      fc.asyncProperty(fc.uint8Array({ maxLength: 200 }), async (bytes) => {
        const answer = await host.handler.handle({ body: Buffer.from(bytes), headers: { 'content-type': 'application/json' } });
        expect(answer.status).toBe(400);
        if (!('error' in parseWire(answer.body))) expect(answer.body).toContain('"code"');
      }),
      { numRuns: 200 },
    );
  });
});
