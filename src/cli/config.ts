import { readFileSync, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { ConnectorConfigError, createHermesConnector, createMemoryLedger, createPostgresLedger, createSqliteLedger } from '../index.js';
import type { HermesConnector, HermesConnectorOptions, HermesEndpointConfig, RunLedger } from '../index.js';
import { fileErrorText } from './args.js';
import { parseJsonText } from '../internal/json-text.js';
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
  /** A durable run ledger, when configured; otherwise the connector keeps its records in memory for one command. */
  readonly ledger?: LedgerSpec;
  /** The config file's "journal" field as written: the connector's `journal` option, which it validates. */
  readonly journal?: unknown;
  /** The config file's "webhooks" field, each secretFile resolved against the file's folder: the connector's `webhooks` option, which it validates. */
  readonly webhooks?: unknown;
  /** The config file's "delivery" field as written: the connector's `delivery` option (the outbox's settings), which it validates. */
  readonly delivery?: unknown;
  /** The config file's "mcp" field as written, and the file's folder; read by `hermes-aip mcp` only. */
  readonly mcp?: { value: unknown; folder: string };
}

/** Where the run ledger lives. A PostgreSQL URL may hold a password: it is read from the environment and never printed. */
export type LedgerSpec = { kind: 'sqlite'; path: string } | { kind: 'postgres'; connectionString: string; from: string };

/** The config file's top-level fields. */
const FILE_FIELDS = new Set(['endpoints', 'ledger', 'mcp', 'journal', 'webhooks', 'delivery']);
const ENDPOINT_FIELDS = new Set(['id', 'baseUrl', 'apiKeyFile', 'apiKeyEnv', 'tenantId', 'displayName', 'operations']);
export const DEFAULT_ENDPOINT_ID = 'default';
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

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
    ...ledgerFromEnvironment(env),
  };
}

/**
 * HERMES_LEDGER: `sqlite:<path>` or a `postgres://` / `postgresql://` URL. A config file's own
 * "ledger" field takes precedence.
 */
function ledgerFromEnvironment(env: NodeJS.ProcessEnv): { ledger?: LedgerSpec } {
  const value = env['HERMES_LEDGER'];
  if (value === undefined || value === '') return {};
  if (value.startsWith('sqlite:') && value.length > 'sqlite:'.length) return { ledger: { kind: 'sqlite', path: resolve(value.slice('sqlite:'.length)) } };
  if (/^postgres(?:ql)?:\/\//.test(value)) return { ledger: { kind: 'postgres', connectionString: value, from: 'environment variable HERMES_LEDGER' } };
  throw new UsageError('HERMES_LEDGER must be sqlite:<path> or a postgres:// URL');
}

/** The "ledger" field of a config file: { "sqlite": "<path>" } (relative to the file) or { "postgresEnv": "<VARIABLE>" }. */
function ledgerFromFile(value: unknown, where: string, folder: string, env: NodeJS.ProcessEnv): LedgerSpec {
  const shape = `${where}: "ledger" must be { "sqlite": "<path>" } or { "postgresEnv": "<environment variable>" }`;
  if (!isObject(value) || Object.keys(value).length !== 1) throw new UsageError(shape);
  if (typeof value['sqlite'] === 'string' && value['sqlite'] !== '') return { kind: 'sqlite', path: resolve(folder, value['sqlite']) };
  const name = value['postgresEnv'];
  if (typeof name !== 'string' || !ENV_NAME.test(name)) throw new UsageError(shape);
  return { kind: 'postgres', connectionString: variableNamedBy(env, name, where, 'ledger postgresEnv'), from: `environment variable ${name}` };
}

/** The value of the environment variable a config field names; unset or empty is a usage error naming the field. */
function variableNamedBy(env: NodeJS.ProcessEnv, name: string, where: string, field: string): string {
  const value = env[name];
  if (value === undefined || value === '') throw new UsageError(`${where}: environment variable ${name} (its ${field}) is not set`);
  return value;
}

function loadConfigFile(configPath: string, env: NodeJS.ProcessEnv): LoadedConfig {
  let text: string;
  try {
    text = readFileSync(configPath, 'utf8');
  } catch (error) {
    // The path is not quoted: when it cannot be read it may be anything, a pasted key included.
    throw new UsageError(`cannot read the config file given with --config: ${fileErrorText(error)}`);
  }
  const document = parseJsonText(text, (why) => new UsageError(`config file ${configPath} is not valid JSON: ${why}`));
  const where = `config file ${configPath}`;
  if (!isObject(document) || !Array.isArray(document['endpoints']) || document['endpoints'].length === 0) {
    throw new UsageError(`${where}: expected { "endpoints": [ { "id", "baseUrl", "apiKeyFile" | "apiKeyEnv", ... } ] } with at least one endpoint`);
  }
  for (const field of Object.keys(document)) {
    if (!FILE_FIELDS.has(field)) throw new UsageError(`${where}: unknown field "${printable(field)}"`);
  }
  const folder = dirname(resolve(configPath));
  const endpoints = document['endpoints'].map((entry: unknown, index: number) => loadEndpoint(entry, `${where}: endpoints[${index}]`, folder, env));
  const ledger = document['ledger'] === undefined ? ledgerFromEnvironment(env) : { ledger: ledgerFromFile(document['ledger'], where, folder, env) };
  const mcp = document['mcp'] === undefined ? {} : { mcp: { value: document['mcp'], folder } };
  const journal = document['journal'] === undefined ? {} : { journal: document['journal'] };
  const webhooks = document['webhooks'] === undefined ? {} : { webhooks: webhooksFromFile(document['webhooks'], folder) };
  const delivery = document['delivery'] === undefined ? {} : { delivery: document['delivery'] };
  return { source: `file ${configPath}`, endpoints, ...ledger, ...mcp, ...journal, ...webhooks, ...delivery };
}

/** The "webhooks" field with each `secretFile` resolved against the config file's folder; the rest the connector checks. */
function webhooksFromFile(value: unknown, folder: string): unknown {
  if (!Array.isArray(value)) return value;
  return value.map((entry: unknown) =>
    isObject(entry) && typeof entry['secretFile'] === 'string' && entry['secretFile'] !== ''
      ? { ...entry, secretFile: resolve(folder, entry['secretFile']) }
      : entry,
  );
}

function loadEndpoint(entry: unknown, where: string, folder: string, env: NodeJS.ProcessEnv): LoadedEndpoint {
  if (!isObject(entry)) throw new UsageError(`${where} must be an object`);
  for (const field of Object.keys(entry)) {
    if (field === 'apiKey') throw new UsageError(`${where}: "apiKey" is not read from the config file; use "apiKeyFile" or "apiKeyEnv"`);
    if (!ENDPOINT_FIELDS.has(field)) throw new UsageError(`${where}: unknown field "${printable(field)}"`);
  }
  const { id, baseUrl, apiKeyFile, apiKeyEnv, tenantId, displayName, operations } = entry;
  if (typeof id !== 'string') throw new UsageError(`${where}: "id" must be a string`);
  const named = `${where} (${printable(id)})`;
  if (typeof baseUrl !== 'string') throw new UsageError(`${named}: "baseUrl" must be a string`);
  for (const [field, value] of [
    ['tenantId', tenantId],
    ['displayName', displayName],
  ] as const) {
    if (value !== undefined && typeof value !== 'string') throw new UsageError(`${named}: "${field}" must be a string`);
  }
  if ((apiKeyFile === undefined) === (apiKeyEnv === undefined)) throw new UsageError(`${named}: give exactly one of "apiKeyFile" and "apiKeyEnv"`);
  const config: LoadedEndpoint['config'] = { id, baseUrl, apiKey: '' };
  if (typeof tenantId === 'string') config.tenantId = tenantId;
  if (typeof displayName === 'string') config.displayName = displayName;
  // Checked with the rest of the endpoint by createHermesConnector (invalid_operations).
  if (operations !== undefined) config.operations = operations as HermesEndpointConfig['operations'];
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
  if (typeof apiKeyEnv !== 'string' || !ENV_NAME.test(apiKeyEnv)) {
    throw new UsageError(`${named}: "apiKeyEnv" must be an environment variable name`);
  }
  config.apiKey = checkedKey(variableNamedBy(env, apiKeyEnv, named, 'apiKeyEnv'), `environment variable ${apiKeyEnv}`);
  return { config, keySource: `apiKeyEnv ${apiKeyEnv}` };
}

/** The key without surrounding whitespace (a key file usually ends with a newline); empty is an error. */
function checkedKey(raw: string, source: string): string {
  const key = raw.trim();
  if (key === '') throw new UsageError(`${source} holds no API key (it is empty)`);
  return key;
}

/**
 * The connector for these endpoints and its run ledger (the configured one, else one in memory for
 * this command), delivering run events to `delivery.eventTargets` when given; the connector's close() closes the ledger too. Configuration errors are usage
 * errors (their messages hold no secret).
 */
export function openConnector(
  config: LoadedConfig,
  delivery: Pick<HermesConnectorOptions, 'eventTargets'> = {},
): { connector: HermesConnector; ledger: RunLedger } {
  let ledger: RunLedger | undefined;
  try {
    ledger = config.ledger ? openLedger(config.ledger) : createMemoryLedger();
    const endpoints = config.endpoints.map((endpoint) => ({ ...endpoint.config }));
    const options: HermesConnectorOptions = { endpoints, ledger, ...delivery };
    // Passed as written: the connector validates them (invalid_journal, invalid_webhooks, invalid_delivery).
    if (config.journal !== undefined) options.journal = config.journal as HermesConnectorOptions['journal'];
    if (config.webhooks !== undefined) options.webhooks = config.webhooks as HermesConnectorOptions['webhooks'];
    if (config.delivery !== undefined) options.delivery = config.delivery as HermesConnectorOptions['delivery'];
    const connector = createHermesConnector(options);
    const owned = ledger;
    return {
      connector: {
        ...connector,
        async close() {
          await connector.close();
          await owned.close();
        },
      },
      ledger,
    };
  } catch (error) {
    void ledger?.close();
    if (error instanceof ConnectorConfigError) throw new UsageError(`invalid configuration (${config.source}): ${error.message}`);
    throw error;
  }
}

function openLedger(spec: LedgerSpec): RunLedger {
  return spec.kind === 'sqlite' ? openSqliteLedger(spec.path) : createPostgresLedger({ connectionString: spec.connectionString });
}

/** The SQLite ledger, or a usage error that says what is wrong with its path (the driver's words otherwise). */
function openSqliteLedger(path: string): RunLedger {
  const where = `cannot open the SQLite run ledger ${path}`;
  if (statSync(path, { throwIfNoEntry: false })?.isDirectory()) throw new UsageError(`${where}: it is a directory`);
  if (!statSync(dirname(path), { throwIfNoEntry: false })?.isDirectory()) throw new UsageError(`${where}: its folder does not exist`);
  try {
    return createSqliteLedger({ path });
  } catch (error) {
    if (error instanceof ConnectorConfigError) throw error;
    throw new UsageError(`${where}: ${error instanceof Error ? error.message : String(error)}`);
  }
}

/** The ledger as evidence may name it: its kind, and for SQLite its file (never a PostgreSQL URL). */
export function describeLedger(spec: LedgerSpec | undefined): { kind: 'memory' | 'sqlite' | 'postgres'; location: string } {
  if (!spec) return { kind: 'memory', location: 'in memory, for this command only' };
  return spec.kind === 'sqlite' ? { kind: 'sqlite', location: spec.path } : { kind: 'postgres', location: spec.from };
}

export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** A field name or id as given, cut short and without control characters, for an error message. */
export function printable(text: string): string {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it replaces
  const clean = text.replace(/[\x00-\x1f\x7f]/g, '?');
  return clean.length > 64 ? `${clean.slice(0, 64)}…` : clean;
}
