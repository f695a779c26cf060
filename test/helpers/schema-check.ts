import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Ajv2020 } from 'ajv/dist/2020.js';
import type { ValidateFunction } from 'ajv';

/** The test suite's own compilation of schemas/, independent of the connector's loader. */
const root = fileURLToPath(new URL('../../schemas/', import.meta.url));
const ajv = new Ajv2020({ strict: true, strictRequired: false, strictTypes: false, allErrors: true });
for (const file of walk(root)) ajv.addSchema(JSON.parse(readFileSync(join(root, file), 'utf8')));

function walk(dir: string, prefix = ''): string[] {
  return readdirSync(join(dir, prefix), { withFileTypes: true }).flatMap((entry) => {
    const relative = prefix ? `${prefix}/${entry.name}` : entry.name;
    return entry.isDirectory() ? walk(dir, relative) : entry.name.endsWith('.json') ? [relative] : [];
  });
}

export function schemaValidator(relativePath: string): ValidateFunction {
  const validate = ajv.getSchema(`https://schemas.aip-connector-hermes-agent.local/${relativePath}`);
  if (!validate) throw new Error(`no schema ${relativePath}`);
  return validate;
}

/** Throws with the schema errors when `value` does not match. */
export function assertMatches(relativePath: string, value: unknown): void {
  const validate = schemaValidator(relativePath);
  if (!validate(value)) {
    throw new Error(`${relativePath}: ${ajv.errorsText(validate.errors)}\n${JSON.stringify(value).slice(0, 2000)}`);
  }
}
