/** The built `hermes-aip host` as a process, on a free loopback port, registered with a control stub. */
import { createServer } from 'node:net';
import { join } from 'node:path';
import { afterEach } from 'vitest';
import { finished, spawnCli, waitForOutput } from '../cli/helpers.js';
import { type ControlStub, startControlStub } from './control-stub.js';
import { type HostEnv, hostEnv, prefixed } from './host-env.js';

const stubs: ControlStub[] = [];
afterEach(async () => {
  await Promise.all(stubs.splice(0).map((stub) => stub.close()));
});

export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** Polls `condition` every 20 ms until it holds; fails after `timeoutMs` (a hang guard, never a timing assertion). */
export async function waitUntil(condition: () => boolean | Promise<boolean>, what = 'the condition', timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

export interface HostProcess {
  readonly base: string;
  readonly port: number;
  readonly env: HostEnv;
  readonly stub: ControlStub;
  readonly child: ReturnType<typeof spawnCli>;
  /** The process's end, with everything it wrote. */
  readonly exit: ReturnType<typeof finished>;
  /** The parsed `AIP connector host listening` line. */
  readonly startLine: Record<string, unknown>;
}

/**
 * Starts `hermes-aip host --config configPath` with a SQLite ledger, heartbeats every 200 ms, and
 * `settings` over the defaults; `prepare` sets the control stub up before the host first calls it;
 * `environment`: other variables of the process.
 */
export async function launchHost(
  configPath: string,
  settings: Record<string, string> = {},
  prepare: (stub: ControlStub) => void = () => {},
  environment: Record<string, string> = {},
): Promise<HostProcess> {
  const env = hostEnv();
  const stub = await startControlStub(env.did);
  stubs.push(stub);
  prepare(stub);
  const port = await freePort();
  const variables = {
    ...env.settings,
    BIND: `127.0.0.1:${port}`,
    PUBLIC_ENDPOINT: `http://127.0.0.1:${port}/aip/v1/messages`,
    CONTROL_ENDPOINT: stub.url,
    CONTROL_DID: stub.did,
    HEARTBEAT_MS: '200',
    ...settings,
  };
  const child = spawnCli(['host', '--config', configPath], {
    env: { ...prefixed(variables), HERMES_LEDGER: `sqlite:${join(env.folder, 'ledger.sqlite')}`, ...environment },
  });
  const exit = finished(child, ['host'], 40_000);
  const output = await waitForOutput(child.stderr, 'AIP connector host listening');
  const line = output.split('\n').find((text) => text.includes('AIP connector host listening')) ?? '{}';
  return { base: `http://127.0.0.1:${port}`, port, env, stub, child, exit, startLine: JSON.parse(line) as Record<string, unknown> };
}
