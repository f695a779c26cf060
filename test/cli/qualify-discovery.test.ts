/**
 * Check 1 compares what an outside caller discovers with the seed's table, not with the files
 * the registry was built from: a package whose contracts/ were tampered with fails it.
 */
import { spawn } from 'node:child_process';
import { cpSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { CLI, checksById, finished, readEvidence, simulatorWithConfig, tempDir } from './helpers.js';

const root = fileURLToPath(new URL('../../', import.meta.url));

/** A copy of the built package (dist, schemas, contracts) with one contract changed by `tamper`. */
function tamperedPackage(contract: string, tamper: (declaration: Record<string, any>) => void): string {
  const copy = tempDir();
  for (const folder of ['dist', 'schemas', 'contracts']) cpSync(join(root, folder), join(copy, folder), { recursive: true });
  cpSync(join(root, 'package.json'), join(copy, 'package.json'));
  symlinkSync(join(root, 'node_modules'), join(copy, 'node_modules'));
  const path = join(copy, 'contracts', `${contract}.json`);
  const declaration = JSON.parse(readFileSync(path, 'utf8')) as Record<string, any>;
  tamper(declaration);
  writeFileSync(path, JSON.stringify(declaration, null, 2));
  return copy;
}

describe('qualification check 1 (discovery) against a tampered contract', { timeout: 60_000 }, () => {
  it.each([
    [
      'run_stop published as low risk',
      'run_stop',
      (d: Record<string, any>) => void (d.risk = 'low'),
      /run_stop does not publish what the seed's table says: risk is "low", not "medium"/,
    ],
    [
      'run_start without a required idempotency key',
      'run_start',
      (d: Record<string, any>) => void (d.contract.idempotency.requirement = 'optional'),
      /run_start .*idempotency is "optional", not "required"/,
    ],
    [
      'run_status declaring a write',
      'run_status',
      (d: Record<string, any>) => void d.contract.side_effects.push('write'),
      /run_status .*side_effects is \["external_network","read","write"\]/,
    ],
    [
      'run_events on another path',
      'run_events',
      (d: Record<string, any>) => void (d.http.path = '/v1/runs/{run_id}/stream'),
      /run_events .*path is "\/v1\/runs\/\{run_id\}\/stream"/,
    ],
  ])('%s: discovery fails, naming the difference', async (_name, contract, tamper, reason) => {
    const copy = tamperedPackage(contract, tamper);
    const out = join(copy, 'out');
    const run = await finished(
      spawn(process.execPath, [join(copy, 'dist', 'cli', 'main.js'), 'qualify', '--simulate', '--out', out], { env: { PATH: process.env['PATH'] ?? '' } }),
      ['qualify'],
    );
    expect(run.code, run.stdout + run.stderr).toBe(1);
    const discovery = checksById(readEvidence(out)).get('discovery');
    expect(discovery?.result).toBe('failed');
    expect(discovery?.reason).toMatch(reason);
  });

  it('the untampered copy passes (the copy itself is sound)', async () => {
    const copy = tamperedPackage('run_stop', () => undefined);
    const out = join(copy, 'out');
    const run = await finished(
      spawn(process.execPath, [join(copy, 'dist', 'cli', 'main.js'), 'qualify', '--simulate', '--out', out], { env: { PATH: process.env['PATH'] ?? '' } }),
      ['qualify'],
    );
    expect(run.code, run.stdout + run.stderr).toBe(0);
    expect(checksById(readEvidence(out)).get('discovery')?.result).toBe('passed');
  });
});

describe('qualification check 1 (discovery) with run_steer configured', { timeout: 60_000 }, () => {
  /** An endpoints file for a simulator whose endpoint opts into run_steer; `cli` is the CLI to run. */
  async function qualifyWithSteer(cli: string) {
    const { configPath, folder } = await simulatorWithConfig();
    const config = JSON.parse(readFileSync(configPath, 'utf8')) as { endpoints: Array<Record<string, unknown>> };
    for (const endpoint of config.endpoints) endpoint['operations'] = { run_steer: true };
    writeFileSync(configPath, JSON.stringify(config));
    const out = join(folder, 'out');
    const run = await finished(
      spawn(process.execPath, [cli, 'qualify', '--config', configPath, '--out', out, '--timeout', '10'], { env: { PATH: process.env['PATH'] ?? '' } }),
      ['qualify'],
    );
    return { code: run.code, discovery: checksById(readEvidence(out)).get('discovery') };
  }

  it('expects the six capability ids, run_steer with its contract', async () => {
    const { discovery } = await qualifyWithSteer(CLI);
    expect(discovery?.result, discovery?.reason ?? '').toBe('passed');
    expect(discovery?.evidence['capability_ids']).toEqual(
      ['run_start', 'run_status', 'run_events', 'run_approval', 'run_stop', 'run_steer'].map((op) => `cap:hermes_agent:local:${op}`),
    );
  });

  it('fails when the published run_steer contract differs from the table (low risk)', async () => {
    const copy = tamperedPackage('run_steer', (d) => void (d.risk = 'low'));
    const { code, discovery } = await qualifyWithSteer(join(copy, 'dist', 'cli', 'main.js'));
    expect(code).toBe(1);
    expect(discovery?.reason).toMatch(/run_steer does not publish what the seed's table says: risk is "low", not "medium"/);
  });
});
