import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { Ajv2020 } from 'ajv/dist/2020.js';
import type { ErrorObject, ValidateFunction } from 'ajv';
import { PACKAGE_ROOT } from '../internal/package-info.js';
import { OPERATION_NAMES, type OperationName } from '../types.js';
import { STRING_LENGTH_KEYWORDS } from './string-length.js';

const SCHEMA_BASE = 'https://schemas.aip-connector-hermes-agent.local/';

export interface OperationDeclaration {
  operation: OperationName;
  title: string;
  description: string;
  risk: 'low' | 'medium' | 'high' | 'critical';
  http: { method: 'GET' | 'POST'; path: string; streaming: boolean; provider_timeout_ms: number | null };
  contract: ContractData;
}

/** A contract is a read when it declares no `write` side effect (the facts every read rule derives from). */
export function isReadContract(contract: { side_effects: readonly string[] }): boolean {
  return !contract.side_effects.includes('write');
}

export interface ContractData {
  side_effects: string[];
  idempotency: { requirement: 'required' | 'optional' | 'unsupported'; ttl_ms?: number };
  execution: {
    supports_sync: boolean;
    supports_async: boolean;
    supports_streaming: boolean;
    supports_cancel: boolean;
    supports_retry: boolean;
  };
  approval?: { required: boolean; ttl_ms?: number };
  sla: { timeout_ms: number };
  [field: string]: unknown;
}

export interface OperationSchemas {
  readonly declaration: OperationDeclaration;
  readonly inputSchema: Record<string, unknown>;
  readonly outputSchema: Record<string, unknown>;
  readonly validateInput: ValidateFunction;
  readonly validateOutput: ValidateFunction;
}

export interface SchemaCatalog {
  readonly operations: Readonly<Record<OperationName, OperationSchemas>>;
  /** Validator for any schema file by its path below schemas/, e.g. `aip/manifest.schema.json`. */
  validator(relativePath: string): ValidateFunction;
}

let catalog: SchemaCatalog | undefined;

/** Schemas and contracts are data on disk, read and compiled once per process. */
export function schemaCatalog(): SchemaCatalog {
  catalog ??= loadCatalog();
  return catalog;
}

function loadCatalog(): SchemaCatalog {
  const ajv = new Ajv2020({ strict: true, strictRequired: false, strictTypes: false, allErrors: false, validateFormats: false });
  for (const definition of STRING_LENGTH_KEYWORDS) ajv.removeKeyword(definition.keyword as string).addKeyword(definition);
  const documents = new Map<string, Record<string, unknown>>();
  for (const relativePath of listJsonFiles(join(PACKAGE_ROOT, 'schemas'))) {
    const schema = readJson(join(PACKAGE_ROOT, 'schemas', relativePath));
    documents.set(relativePath, deepFreeze(schema));
    ajv.addSchema(schema);
  }
  const validator = (relativePath: string): ValidateFunction => {
    const found = ajv.getSchema(SCHEMA_BASE + relativePath);
    if (!found) throw new Error(`schema ${relativePath} is not part of the package`);
    return found;
  };
  const validateDeclaration = validator('connector/operation-declaration.schema.json');

  const operations = {} as Record<OperationName, OperationSchemas>;
  for (const name of OPERATION_NAMES) {
    const declaration = readJson(join(PACKAGE_ROOT, 'contracts', `${name}.json`));
    if (!validateDeclaration(declaration) || declaration.operation !== name) {
      throw new Error(`contracts/${name}.json is invalid: ${describeSchemaErrors(validateDeclaration.errors)}`);
    }
    const inputPath = `operations/${name}.input.schema.json`;
    const outputPath = `operations/${name}.output.schema.json`;
    operations[name] = Object.freeze({
      declaration: deepFreeze(declaration) as unknown as OperationDeclaration,
      inputSchema: documents.get(inputPath) ?? missing(inputPath),
      outputSchema: documents.get(outputPath) ?? missing(outputPath),
      validateInput: validator(inputPath),
      validateOutput: validator(outputPath),
    });
  }
  return { operations: Object.freeze(operations), validator };
}

/** A short, value-free description of the first schema violation. */
export function describeSchemaErrors(errors: ErrorObject[] | null | undefined): string {
  const first = errors?.[0];
  if (!first) return 'does not match its schema';
  const where = first.instancePath === '' ? 'the value' : `\`${first.instancePath}\``;
  return `${where} ${first.message ?? 'is invalid'}`;
}

function listJsonFiles(root: string, prefix = ''): string[] {
  const files: string[] = [];
  for (const entry of readdirSync(join(root, prefix), { withFileTypes: true })) {
    const relative = prefix === '' ? entry.name : `${prefix}/${entry.name}`;
    if (entry.isDirectory()) files.push(...listJsonFiles(root, relative));
    else if (entry.name.endsWith('.json')) files.push(relative);
  }
  return files.sort();
}

function readJson(path: string): Record<string, unknown> {
  return JSON.parse(readFileSync(path, 'utf8')) as Record<string, unknown>;
}

function missing(path: string): never {
  throw new Error(`schema ${path} is missing from the package`);
}

export function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const item of Object.values(value)) deepFreeze(item);
  }
  return value;
}
