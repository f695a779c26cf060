import { describe, expect, it } from 'vitest';
import { createProgress } from '../../src/cli/progress.js';
import type { CheckRecord, EndpointRecord } from '../../src/cli/evidence.js';

const CHECKS = [{ id: 'discovery' }, { id: 'start_and_status' }];

function record(id: 'discovery' | 'start_and_status', number: number, reason: string | null): CheckRecord {
  const at = new Date(0).toISOString();
  return { id, number, title: id, result: reason === null ? 'passed' : 'failed', reason, started_at: at, finished_at: at, duration_ms: 12, evidence: {} };
}

function drive(isTTY: boolean): string {
  let text = '';
  const progress = createProgress({ isTTY, write: (chunk: string) => (text += chunk) });
  progress.endpointStarted('local', 'http://127.0.0.1:1', CHECKS);
  progress.checkStarted('discovery');
  const checks = [record('discovery', 1, null), record('start_and_status', 2, 'run_start did not return a run id')];
  progress.checkFinished(checks[0] as CheckRecord);
  progress.checkStarted('start_and_status');
  progress.checkFinished(checks[1] as CheckRecord);
  progress.endpointFinished({ endpoint_id: 'local', result: 'failed', duration_ms: 24, checks } as EndpointRecord);
  progress.close();
  return text;
}

describe('qualification progress', () => {
  it('writes plain lines, without escape sequences, when the output is not a terminal', () => {
    expect(drive(false)).toBe(
      [
        'Endpoint local (http://127.0.0.1:1): 2 checks',
        '  PASS 1. discovery (12 ms)',
        '  FAIL 2. start_and_status (12 ms): run_start did not return a run id',
        'Endpoint local: FAILED (1/2 checks passed, 24 ms)',
        '',
      ].join('\n'),
    );
  });

  it('redraws one line per check in place on a terminal', () => {
    const text = drive(true);
    expect(text).toContain('\x1b[2A');
    expect(text).toContain('\r\x1b[2K');
    expect(text).toMatch(/✔.*1\. discovery/);
    expect(text).toMatch(/✘ {2}2\. start_and_status/);
    expect(text).toContain('start_and_status\x1b[0m: run_start did not return a run id');
  });
});
