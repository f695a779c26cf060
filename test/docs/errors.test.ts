/**
 * docs/errors.md, shipped in the package, states exactly the code's catalogue: every code, its
 * category, its retryable rule and whether Hermes was asked. The rules are read from
 * toProtocolError's behaviour, not restated.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { FAILURE_CATALOGUE, HermesFailure, errorCode, toProtocolError, type FailureCode } from '../../src/failures.js';

const root = fileURLToPath(new URL('../../', import.meta.url));

/** The rows of the catalogue table: code → its cells. */
function documentedRows(): Map<string, { category: string; retryable: string; asked: string }> {
  const text = readFileSync(`${root}docs/errors.md`, 'utf8');
  const rows = text.split('\n').filter((line) => line.startsWith('| `'));
  return new Map(
    rows.map((line) => {
      const [code, category, retryable, asked] = line
        .split('|')
        .slice(1, 5)
        .map((cell) => cell.trim().replace(/`/g, ''));
      return [code as string, { category: category as string, retryable: retryable as string, asked: asked as string }];
    }),
  );
}

function retryableRule(code: FailureCode): string {
  const onRead = toProtocolError(new HermesFailure(code, 'm'), 'ep', 'run_status').retryable;
  const onMutation = toProtocolError(new HermesFailure(code, 'm'), 'ep', 'run_start').retryable;
  if (onRead && onMutation) return 'always';
  return onRead ? 'reads' : 'never';
}

describe('docs/errors.md', () => {
  it('lists exactly the catalogue’s codes, each with its category, retryable rule and whether Hermes was asked', () => {
    const documented = documentedRows();
    const codes = Object.keys(FAILURE_CATALOGUE) as FailureCode[];
    expect([...documented.keys()].sort()).toEqual(
      codes
        .map(errorCode)
        .map((full) => full.slice('connector.hermes_agent.'.length))
        .sort(),
    );
    for (const code of codes) {
      expect(documented.get(code), code).toEqual({
        category: FAILURE_CATALOGUE[code].category,
        retryable: retryableRule(code),
        asked: FAILURE_CATALOGUE[code].providerCalled,
      });
    }
  });

  it('ships in the package', () => {
    const manifest = JSON.parse(readFileSync(`${root}package.json`, 'utf8')) as { files: string[] };
    expect(manifest.files).toContain('docs');
  });
});
