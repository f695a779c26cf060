import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { assertMatches } from '../helpers/schema-check.js';
import { runCli, tempDir } from '../cli/helpers.js';

describe('hermes-aip conformance --simulate --out DIR', { timeout: 60_000 }, () => {
  it('passes, writes a schema-valid conformance.json and a self-contained conformance.html, and leaks no key', async () => {
    const out = join(tempDir(), 'conformance');
    const run = await runCli(['conformance', '--simulate', '--out', out]);
    expect(run.code, run.stdout + run.stderr).toBe(0);
    expect(run.stderr).toBe('');
    expect(run.stdout).toMatch(/Conformance PASSED: 11 passed, 2 not applicable, 0 failed of 13 checks; 2 static finding\(s\) reported/);
    expect(run.stdout).toContain('static FAIL enterprise.capability_contract (2 finding(s), reported only)');

    const artifact = JSON.parse(readFileSync(join(out, 'conformance.json'), 'utf8')) as {
      result: string;
      identities: Record<string, unknown>;
      endpoints: Array<{ checks: Array<{ id: string; verdict: string }> }>;
    };
    assertMatches('conformance/conformance.schema.json', artifact);
    expect(artifact.result).toBe('passed');
    expect(artifact.identities).toMatchObject({ aip_protocol_version: '1.0', hermes_pinned_revision: '7426c09beee73bdff94d916015bac71384f6bc92' });
    expect(artifact.endpoints[0]?.checks.filter((check) => check.verdict === 'not_applicable').map((check) => check.id)).toEqual([
      'connector.behavior.transaction_lifecycle',
      'connector.behavior.webhook_security',
    ]);

    const html = readFileSync(join(out, 'conformance.html'), 'utf8');
    expect(html).toContain('data-check="connector.behavior.restart_reconnect" data-result="passed"');
    expect(html).not.toMatch(/<script|https?:\/\/(?!127\.0\.0\.1)[^"<\s]*\.(css|js)/);
    const written = readFileSync(join(out, 'conformance.json'), 'utf8') + html + run.stdout;
    expect(written).not.toMatch(/hk_sim_[0-9a-f]+/);
    expect(written).not.toMatch(/Bearer [A-Za-z0-9_]/);
  });

  it('refuses --profile without --simulate (exit 2)', async () => {
    const run = await runCli(['conformance', '--profile', 'later']);
    expect(run.code).toBe(2);
    expect(run.stderr).toBe('hermes-aip: conformance: --profile applies only with --simulate\n');
  });
});
