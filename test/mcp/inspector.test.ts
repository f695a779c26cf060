import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { CLI, SIM_KEY, finished, simulatorWithConfig } from '../cli/helpers.js';

/** The bin of @modelcontextprotocol/inspector-cli 1.0.3, in CLI mode. */
const INSPECTOR = fileURLToPath(new URL('../../node_modules/@modelcontextprotocol/inspector-cli/build/cli.js', import.meta.url));
// inspector-cli 1.0.3 finds its own package.json through `../package.json` relative to the working directory:
// it runs only from a folder whose parent holds a package.json, such as dist/.
const INSPECTOR_CWD = fileURLToPath(new URL('../../dist/', import.meta.url));

/**
 * `mcp-inspector-cli --cli node <inspector options> -- <CLI> mcp --config FILE`: the options go
 * before `--` so that the inspector does not take the server's `--config` for its own.
 */
async function inspect(configPath: string, options: string[]): Promise<unknown> {
  const args = [INSPECTOR, '--cli', 'node', ...options, '--', CLI, 'mcp', '--config', configPath];
  const child = spawn(process.execPath, args, { cwd: INSPECTOR_CWD, env: { PATH: process.env['PATH'] ?? '' }, stdio: 'pipe' });
  child.stdin.end();
  const run = await finished(child, args, 30_000);
  expect(run.code, run.stderr).toBe(0);
  expect(run.stdout + run.stderr).not.toContain(SIM_KEY);
  return JSON.parse(run.stdout);
}

describe('MCP Inspector CLI against hermes-aip mcp (stdio)', { timeout: 60_000 }, () => {
  it('lists the five tools and calls run_status', async () => {
    const { sim, configPath } = await simulatorWithConfig();
    const listed = (await inspect(configPath, ['--method', 'tools/list'])) as { tools: Array<{ name: string; outputSchema?: unknown }> };
    expect(listed.tools.map((tool) => tool.name)).toEqual(
      ['run_start', 'run_status', 'run_events', 'run_approval', 'run_stop'].map((op) => `hermes_local_${op}`),
    );
    expect(listed.tools.every((tool) => tool.outputSchema !== undefined)).toBe(true);

    const started = await fetch(`${sim.url}/v1/runs`, {
      method: 'POST',
      headers: { authorization: `Bearer ${SIM_KEY}`, 'content-type': 'application/json' },
      body: '{"input":"hello"}',
    });
    const { run_id: runId } = (await started.json()) as { run_id: string };
    // --tool-arg takes several values: another option must follow it, not the `--`.
    const status = (await inspect(configPath, ['--tool-arg', `run_id=${runId}`, '--method', 'tools/call', '--tool-name', 'hermes_local_run_status'])) as Record<
      string,
      unknown
    >;
    expect(status['isError']).toBeUndefined();
    expect(status['structuredContent']).toMatchObject({ object: 'hermes.run', run_id: runId });

    const unknown = (await inspect(configPath, [
      '--tool-arg',
      'run_id=run_unknown',
      '--method',
      'tools/call',
      '--tool-name',
      'hermes_local_run_status',
    ])) as Record<string, unknown>;
    expect(unknown).toMatchObject({ isError: true, structuredContent: { error: { code: 'connector.hermes_agent.not_found' } } });
  });
});
