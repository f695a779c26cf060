import { readFileSync } from 'node:fs';
import { expect } from 'vitest';
import { resolveConfig, type ResolvedEndpoint } from '../../src/config.js';
import { HermesFailure, type FailureCode } from '../../src/failures.js';
import { schemaCatalog, type OperationDeclaration } from '../../src/contract/schemas.js';
import type { HermesConnectorOptions, HermesEndpointConfig, OperationName } from '../../src/types.js';

/** The project root (test/helpers/../..). */
export const PROJECT_ROOT = new URL('../../', import.meta.url);
/** Raw Hermes exchanges copied from ../shared/reference/captures, so the suite runs without shared/. */
export const CAPTURES_DIR = new URL('fixtures/captures/', PROJECT_ROOT);

export const TEST_API_KEY = 'hk_test_key_0123456789';
export const LOCAL_BASE_URL = 'http://127.0.0.1:9';

export const PACKAGE_VERSION = (JSON.parse(readFileSync(new URL('package.json', PROJECT_ROOT), 'utf8')) as { version: string }).version;

/** Options for createHermesConnector/resolveConfig, typed loosely so that tests can pass bad values. */
export function options(overrides: Record<string, unknown> = {}): HermesConnectorOptions {
  return { endpoints: [{ id: 'ep1', baseUrl: LOCAL_BASE_URL, apiKey: TEST_API_KEY }], ...overrides } as unknown as HermesConnectorOptions;
}

/** One endpoint as the connector resolves it. */
export function resolvedEndpoint(overrides: Partial<HermesEndpointConfig> & Record<string, unknown> = {}): ResolvedEndpoint {
  const endpoint = { id: 'ep1', baseUrl: LOCAL_BASE_URL, apiKey: TEST_API_KEY, ...overrides };
  for (const [key, value] of Object.entries(endpoint)) if (value === undefined) delete (endpoint as Record<string, unknown>)[key];
  const resolved = resolveConfig({ endpoints: [endpoint as HermesEndpointConfig] }).endpoints[0];
  if (!resolved) throw new Error('no endpoint resolved');
  return resolved;
}

export function declarationOf(operation: OperationName): OperationDeclaration {
  return schemaCatalog().operations[operation].declaration;
}

/** Runs `fn`, expects it to throw, and returns what it threw. */
export function caught(fn: () => unknown): unknown {
  try {
    fn();
  } catch (error) {
    return error;
  }
  throw new Error('expected the call to throw, and it returned');
}

/** Expects `fn` to throw a HermesFailure with this code and returns it. */
export function expectFailure(fn: () => unknown, code: FailureCode): HermesFailure {
  const error = caught(fn);
  expect(error).toBeInstanceOf(HermesFailure);
  expect((error as HermesFailure).code).toBe(code);
  return error as HermesFailure;
}

/**
 * The SSE body of a capture file: the bytes after the response head, with the HTTP/1.1
 * chunked transfer coding removed (strictly: every chunk size must match its data).
 */
export function captureSseBody(fileName: string): Buffer {
  return Buffer.concat(captureSseChunks(fileName));
}

/** The SSE body of a capture file as the HTTP chunks the server sent. */
export function captureSseChunks(fileName: string): Buffer[] {
  const raw = readFileSync(new URL(fileName, CAPTURES_DIR));
  const responseAt = raw.indexOf('### response');
  if (responseAt === -1) throw new Error(`${fileName} has no response section`);
  const headEnd = raw.indexOf('\r\n\r\n', responseAt);
  if (headEnd === -1) throw new Error(`${fileName} has no response head`);
  const head = raw.subarray(responseAt, headEnd).toString('latin1');
  if (!/transfer-encoding: chunked/i.test(head)) throw new Error(`${fileName} is not chunked`);
  return dechunk(raw.subarray(headEnd + 4));
}

export function dechunk(body: Buffer): Buffer[] {
  const parts: Buffer[] = [];
  let at = 0;
  for (;;) {
    const lineEnd = body.indexOf('\r\n', at);
    if (lineEnd === -1) throw new Error('chunk size line without CRLF');
    const sizeText = body.subarray(at, lineEnd).toString('latin1').split(';')[0]?.trim() ?? '';
    if (!/^[0-9a-fA-F]+$/.test(sizeText)) throw new Error(`bad chunk size ${JSON.stringify(sizeText)}`);
    const size = parseInt(sizeText, 16);
    at = lineEnd + 2;
    if (size === 0) return parts;
    parts.push(body.subarray(at, at + size));
    at += size;
    if (body.subarray(at, at + 2).toString('latin1') !== '\r\n') throw new Error('chunk data not followed by CRLF');
    at += 2;
  }
}
