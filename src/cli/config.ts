import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { ConnectorConfigError, createHermesConnector } from '../index.js';
import type { HermesConnector, HermesEndpointConfig } from '../index.js';
import { fileErrorText, jsonErrorText } from './args.js';
import { UsageError } from './errors.js';

/** One endpoint as configured, with its key already read, and where that key came from (never the key). */
export interface LoadedEndpoint {
  readonly config: HermesEndpointConfig & { apiKey: string };
  /** `apiKeyFile <path>` or `apiKeyEnv <NAME>`: where the key was read. */
  readonly keySource: string;
}

export interface LoadedConfig {
  readonly endpoints: LoadedEndpoint[];
  /** `file <path>` or `environment (HERMES_BASE_URL, HERMES_API_KEY)`. */
  readonly source: string;
}

const ENDPOINT_FIELDS = new Set(['id', 'baseUrl', 'apiKeyFile', 'apiKeyEnv', 'tenantId', 'displayName']);
export const DEFAULT_ENDPOINT_ID = 'default';

/**
 * The endpoints to use: from `--config FILE` (`{ "endpoints": [{ id, baseUrl, apiKeyFile | apiKeyEnv,
 * tenantId?, displayName? }] }`, a relative apiKeyFile resolved against the file's folder), else from
 * HERMES_BASE_URL and HERMES_API_KEY as one endpoint `default`. Keys come only from files and the
 * environment. Every problem is a UsageError that names the field, never a key.
 */
export function loadConfig(configPath: string | undefined, env: NodeJS.ProcessEnv = process.env): LoadedConfig {
  if (configPath !== undefined) return loadConfigFile(configPath, env);
  const baseUrl = env['HERMES_BASE_URL'];
  const apiKey = env['HERMES_API_KEY'];
  if (!baseUrl && !apiKey) {
    throw new UsageError('no endpoint configured: pass --config FILE, or set HERMES_BASE_URL and HERMES_API_KEY');
  }
  if (!baseUrl) throw new UsageError('HERMES_API_KEY is set but HERMES_BASE_URL is not');
  if (!apiKey) throw new UsageError('HERMES_BASE_URL is set but HERMES_API_KEY is not');
  return {
    source: 'environment (HERMES_BASE_URL, HERMES_API_KEY)',
    endpoints: [{ config: { id: DEFAULT_ENDPOINT_ID, baseUrl, apiKey: checkedKey(apiKey, 'HERMES_API_KEY') }, keySource: 'apiKeyEnv HERMES_API_KEY' }],
  };
}

function loadConfigFile(configPath: string, env: NodeJS.ProcessEnv): LoadedConfig {
  let text: string;
  try {
    text = readFileSync(configPath, 'utf8');
  } catch (error) {
    throw new UsageError(`cannot read config file ${configPath}: ${fileErrorText(error)}`);
  }
  let document: unknown;
  try {
    document = JSON.parse(text);
  } catch (error) {
    throw new UsageError(`config file ${configPath} is not valid JSON: ${jsonErrorText(error)}`);
  }
  const where = `config file ${configPath}`;
  if (!isObject(document) || !Array.isArray(document['endpoints']) || document['endpoints'].length === 0) {
    throw new UsageError(`${where}: expected { "endpoints": [ { "id", "baseUrl", "apiKeyFile" | "apiKeyEnv", ... } ] } with at least one endpoint`);
  }
  const folder = dirname(resolve(configPath));
  const endpoints = document['endpoints'].map((entry: unknown, index: number) => loadEndpoint(entry, `${where}: endpoints[${index}]`, folder, env));
  return { source: `file ${configPath}`, endpoints };
}

function loadEndpoint(entry: unknown, where: string, folder: string, env: NodeJS.ProcessEnv): LoadedEndpoint {
  if (!isObject(entry)) throw new UsageError(`${where} must be an object`);
  for (const field of Object.keys(entry)) {
    if (field === 'apiKey') throw new UsageError(`${where}: "apiKey" is not read from the config file; use "apiKeyFile" or "apiKeyEnv"`);
    if (!ENDPOINT_FIELDS.has(field)) throw new UsageError(`${where}: unknown field "${printable(field)}"`);
  }
  const { id, baseUrl, apiKeyFile, apiKeyEnv, tenantId, displayName } = entry;
  if (typeof id !== 'string') throw new UsageError(`${where}: "id" must be a string`);
  const named = `${where} (${printable(id)})`;
  if (typeof baseUrl !== 'string') throw new UsageError(`${named}: "baseUrl" must be a string`);
  for (const [field, value] of [['tenantId', tenantId], ['displayName', displayName]] as const) {
    if (value !== undefined && typeof value !== 'string') throw new UsageError(`${named}: "${field}" must be a string`);
  }
  if ((apiKeyFile === undefined) === (apiKeyEnv === undefined)) throw new UsageError(`${named}: give exactly one of "apiKeyFile" and "apiKeyEnv"`);
  const config: LoadedEndpoint['config'] = { id, baseUrl, apiKey: '' };
  if (typeof tenantId === 'string') config.tenantId = tenantId;
  if (typeof displayName === 'string') config.displayName = displayName;
  if (apiKeyFile !== undefined) {
    if (typeof apiKeyFile !== 'string' || apiKeyFile === '') throw new UsageError(`${named}: "apiKeyFile" must be a file name`);
    const path = resolve(folder, apiKeyFile);
    let key: string;
    try {
      key = readFileSync(path, 'utf8');
    } catch (error) {
      throw new UsageError(`${named}: cannot read apiKeyFile ${path}: ${fileErrorText(error)}`);
    }
    config.apiKey = checkedKey(key, `apiKeyFile ${path}`);
    return { config, keySource: `apiKeyFile ${path}` };
  }
  if (typeof apiKeyEnv !== 'string' || !/^[A-Za-z_][A-Za-z0-9_]*$/.test(apiKeyEnv)) {
    throw new UsageError(`${named}: "apiKeyEnv" must be an environment variable name`);
  }
  const value = env[apiKeyEnv];
  if (value === undefined || value === '') throw new UsageError(`${named}: environment variable ${apiKeyEnv} (its apiKeyEnv) is not set`);
  config.apiKey = checkedKey(value, `environment variable ${apiKeyEnv}`);
  return { config, keySource: `apiKeyEnv ${apiKeyEnv}` };
}

/** The key without surrounding whitespace (a key file usually ends with a newline); empty is an error. */
function checkedKey(raw: string, source: string): string {
  const key = raw.trim();
  if (key === '') throw new UsageError(`${source} holds no API key (it is empty)`);
  return key;
}

/** The connector for these endpoints; its configuration errors are usage errors (their messages hold no secret). */
export function connectorFor(config: LoadedConfig): HermesConnector {
  try {
    return createHermesConnector({ endpoints: config.endpoints.map((endpoint) => ({ ...endpoint.config })) });
  } catch (error) {
    if (error instanceof ConnectorConfigError) throw new UsageError(`invalid configuration (${config.source}): ${error.message}`);
    throw error;
  }
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** A field name or id as given, cut short and without control characters, for an error message. */
function printable(text: string): string {
  // eslint-disable-next-line no-control-regex
  const clean = text.replace(/[\x00-\x1f\x7f]/g, '?');
  return clean.length > 64 ? `${clean.slice(0, 64)}…` : clean;
}
