import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { checksById, readEvidence, runCli, simulatorWithConfig } from './helpers.js';

describe('qualification of a Hermes whose event streams never terminate', { timeout: 60_000 }, () => {
  it('fails ordered_events with a reason naming the missing terminal event', async () => {
    const { configPath, folder } = await simulatorWithConfig({ misbehaviour: { streamsNeverTerminate: true } });
    const out = join(folder, 'out');
    const run = await runCli(['qualify', '--config', configPath, '--out', out, '--timeout', '3']);
    expect(run.code).toBe(1);
    expect(run.stdout).toMatch(/Qualification FAILED: 7\/8/);

    const checks = checksById(readEvidence(out));
    const ordered = checks.get('ordered_events');
    expect(ordered?.result).toBe('failed');
    expect(ordered?.reason).toMatch(
      /^no terminal event \(run\.completed, run\.failed, run\.cancelled, run\.interrupted\) arrived within 3 s: the stream stayed open after \d+ events? \(last: reasoning\.available\)$/,
    );
    expect(ordered?.evidence['event_names']).not.toContain('run.completed');
    for (const [id, check] of checks) if (id !== 'ordered_events') expect(check.result, `${id}: ${check.reason}`).toBe('passed');
  });
});
