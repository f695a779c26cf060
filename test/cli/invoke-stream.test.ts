import { describe, expect, it } from 'vitest';
import { assertMatches } from '../helpers/schema-check.js';
import type { RunStep } from 'aip-connector-hermes-agent/simulator';
import { SIM_KEY, finished, simulatorWithConfig, spawnCli, waitForOutput } from './helpers.js';

/** Starts a run through the CLI; resolves with its id. */
async function startRun(configPath: string, key: string, script: RunStep[]): Promise<string> {
  const start = await finished(
    spawnCli([
      'invoke',
      'cap:hermes_agent:local:run_start',
      '--config',
      configPath,
      '--idempotency-key',
      key,
      '--input',
      JSON.stringify({ body: { input: 'x', sim_script: script } }),
    ]),
    ['run_start'],
  );
  return (JSON.parse(start.stdout) as { output: { run_id: string } }).output.run_id;
}

/** Answers the run's pending approval, as the person would. */
async function approve(simUrl: string, runId: string): Promise<void> {
  await fetch(`${simUrl}/v1/runs/${runId}/approval`, {
    method: 'POST',
    headers: { authorization: `Bearer ${SIM_KEY}`, 'content-type': 'application/json' },
    body: JSON.stringify({ choice: 'once' }),
  });
}

describe('hermes-aip invoke … run_events', { timeout: 60_000 }, () => {
  it('prints every chunk as one JSON line as it arrives, then the result as the last line', async () => {
    const { sim, configPath } = await simulatorWithConfig();
    const runId = await startRun(configPath, 'stream-1', [
      { type: 'delta', text: 'Hel' },
      { type: 'approval', command: 'rm -rf ./tmp' },
      { type: 'delta', text: 'lo' },
      { type: 'complete', output: 'Hello' },
    ]);

    const child = spawnCli(['invoke', 'cap:hermes_agent:local:run_events', '--config', configPath, '--input', JSON.stringify({ run_id: runId })]);
    const done = finished(child, ['run_events']);
    // The run holds at its approval: the first chunks are on stdout while the run is still going.
    const early = await waitForOutput(child.stdout, '"pending_approval"');
    expect(sim.run(runId)?.status).toBe('waiting_for_approval');
    expect(early).not.toContain('run.completed');
    await approve(sim.url, runId);

    const run = await done;
    expect(run.code, run.stderr).toBe(0);
    const lines = run.stdout
      .trimEnd()
      .split('\n')
      .map((line) => JSON.parse(line) as Record<string, unknown>);
    const chunks = lines.slice(0, -1);
    const result = lines[lines.length - 1] as { status: string; output: { terminal_event: string; events: unknown[] } };
    for (const chunk of chunks) assertMatches('aip/stream-chunk.schema.json', chunk);
    assertMatches('aip/action-result.schema.json', result);
    expect(chunks.map((chunk) => chunk['sequence'])).toEqual(chunks.map((_, index) => index));
    const events = chunks.map((chunk) => (chunk['data'] as { hermes_sse: { event: string } }).hermes_sse.event);
    expect(events).toEqual([
      'message.delta',
      'reasoning.available',
      'tool.started',
      'approval.request',
      'approval.responded',
      'message.delta',
      'reasoning.available',
      'run.completed',
    ]);
    expect(chunks.map((chunk) => chunk['kind'])).toEqual(['data', 'thought', 'tool', 'pending_approval', 'data', 'data', 'thought', 'done']);
    expect(result).toMatchObject({ status: 'completed', output: { terminal_event: 'run.completed' } });
    expect(result.output.events).toHaveLength(8);
  });

  it('finishes the call, without an unhandled EPIPE, when the reader of its output goes away (`| head -1`)', async () => {
    const { sim, configPath } = await simulatorWithConfig();
    const runId = await startRun(configPath, 'stream-gone', [
      { type: 'approval', command: 'ls' },
      ...Array.from({ length: 20 }, () => ({ type: 'delta' as const, text: 'more' })),
      { type: 'complete', output: 'done' },
    ]);

    const child = spawnCli(['invoke', 'cap:hermes_agent:local:run_events', '--config', configPath, '--input', JSON.stringify({ run_id: runId })]);
    let stderr = '';
    child.stderr.on('data', (data: Buffer) => (stderr += data.toString()));
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
      child.once('exit', (code, signal) => resolve({ code, signal })),
    );
    await waitForOutput(child.stdout, '"pending_approval"');
    child.stdout.destroy();
    await approve(sim.url, runId);
    const exit = await exited;
    expect(stderr).not.toContain("Unhandled 'error'");
    expect(exit.signal, stderr).toBeNull();
    console.log('EXIT', JSON.stringify(exit), stderr.slice(0, 300));
    expect(exit.code, stderr).not.toBeNull();
  });
});
