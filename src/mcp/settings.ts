import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { fileErrorText } from '../cli/args.js';
import { isObject, printable, type LoadedConfig } from '../cli/config.js';
import { UsageError } from '../cli/errors.js';
import type { McpIdentity } from './server.js';

/**
 * The config file's "mcp" field:
 * { "tenantId"?, "principalId"?, "tokens"?: [ { "tokenFile" | "tokenEnv", "principalId"? } ] }.
 * Tokens (for --http) come from files or environment variables only, each mapping to a principal.
 */
export interface McpSettings {
  identity: McpIdentity;
  tokens: TokenSource[];
}

export interface TokenSource {
  /** `tokenFile <absolute path>` or `tokenEnv <NAME>`: where the token is, never the token. */
  source: string;
  read: () => string;
  principalId: string;
}

/** One accepted bearer token, kept as its SHA-256 digest only. */
export interface BearerToken {
  digest: Buffer;
  principalId: string;
}

export const DEFAULT_PRINCIPAL = 'hermes-aip-mcp';
export const TOKEN_ENV = 'HERMES_MCP_TOKEN';
const MIN_TOKEN_LENGTH = 16;
const VISIBLE_ASCII = /^[\x21-\x7e]+$/;
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const FIELDS = new Set(['tenantId', 'principalId', 'tokens']);
const TOKEN_FIELDS = new Set(['tokenFile', 'tokenEnv', 'principalId']);

export function mcpSettings(config: LoadedConfig, env: NodeJS.ProcessEnv = process.env): McpSettings {
  const where = `${config.source}: "mcp"`;
  const value = config.mcp?.value ?? {};
  if (!isObject(value)) throw new UsageError(`${where} must be an object`);
  for (const field of Object.keys(value)) if (!FIELDS.has(field)) throw new UsageError(`${where}: unknown field "${printable(field)}"`);
  const tenantId = optionalName(value['tenantId'], `${where}.tenantId`);
  const principalId = optionalName(value['principalId'], `${where}.principalId`) ?? DEFAULT_PRINCIPAL;
  const identity: McpIdentity = tenantId === undefined ? { principalId } : { principalId, tenantId };
  if (value['tokens'] === undefined) return { identity, tokens: [tokenFromEnv(env, TOKEN_ENV, principalId, `environment variable ${TOKEN_ENV}`)] };
  if (!Array.isArray(value['tokens']) || value['tokens'].length === 0) throw new UsageError(`${where}.tokens must be a non-empty array`);
  // "tokens" can only come from a config file, so there is a folder to resolve tokenFile against.
  const { folder } = config.mcp as { folder: string };
  return {
    identity,
    tokens: value['tokens'].map((entry: unknown, index: number) => tokenSource(entry, `${where}.tokens[${index}]`, folder, env, principalId)),
  };
}

/** Reads every token (only `--http` needs them); an empty, short or repeated token stops the server before it listens. */
export function loadTokens(sources: readonly TokenSource[]): BearerToken[] {
  const seen = new Set<string>();
  return sources.map(({ source, read, principalId }) => {
    const token = read().trim();
    if (token.length < MIN_TOKEN_LENGTH || !VISIBLE_ASCII.test(token)) {
      throw new UsageError(`${source}: the MCP bearer token must be at least ${MIN_TOKEN_LENGTH} visible ASCII characters`);
    }
    const digest = createHash('sha256').update(token).digest();
    if (seen.has(digest.toString('hex'))) throw new UsageError(`${source}: the same MCP bearer token is configured twice`);
    seen.add(digest.toString('hex'));
    return { digest, principalId };
  });
}

function tokenSource(entry: unknown, where: string, folder: string, env: NodeJS.ProcessEnv, defaultPrincipal: string): TokenSource {
  if (!isObject(entry)) throw new UsageError(`${where} must be an object`);
  for (const field of Object.keys(entry)) {
    if (field === 'token') throw new UsageError(`${where}: "token" is not read from the config file; use "tokenFile" or "tokenEnv"`);
    if (!TOKEN_FIELDS.has(field)) throw new UsageError(`${where}: unknown field "${printable(field)}"`);
  }
  const principalId = optionalName(entry['principalId'], `${where}.principalId`) ?? defaultPrincipal;
  const { tokenFile, tokenEnv } = entry;
  if ((tokenFile === undefined) === (tokenEnv === undefined)) throw new UsageError(`${where}: give exactly one of "tokenFile" and "tokenEnv"`);
  if (tokenEnv !== undefined) {
    if (typeof tokenEnv !== 'string' || !ENV_NAME.test(tokenEnv)) throw new UsageError(`${where}: "tokenEnv" must be an environment variable name`);
    return tokenFromEnv(env, tokenEnv, principalId, `${where} (tokenEnv ${tokenEnv})`);
  }
  if (typeof tokenFile !== 'string' || tokenFile === '') throw new UsageError(`${where}: "tokenFile" must be a file name`);
  const path = resolve(folder, tokenFile);
  return {
    source: `tokenFile ${path}`,
    principalId,
    read: () => {
      try {
        return readFileSync(path, 'utf8');
      } catch (error) {
        throw new UsageError(`${where}: cannot read tokenFile ${path}: ${fileErrorText(error)}`);
      }
    },
  };
}

function tokenFromEnv(env: NodeJS.ProcessEnv, name: string, principalId: string, source: string): TokenSource {
  return {
    source,
    principalId,
    read: () => {
      const value = env[name];
      if (value === undefined || value === '') throw new UsageError(`${source}: environment variable ${name} is not set (--http needs a bearer token)`);
      return value;
    },
  };
}

function optionalName(value: unknown, where: string): string | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'string' || value === '' || value.length > 256) throw new UsageError(`${where} must be a string of 1-256 characters`);
  return value;
}
