/**
 * `hermes-aip host` as a process: bad settings exit 2 before anything listens, --print-did, the
 * start line, registration against a loopback control plane, and SIGTERM: drain, then offline, exit 0.
 */
import { createServer, type Server } from 'node:net';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { manifestDigest } from '../../src/host/wire/manifest.js';
import { expectOneErrorLine, runCli, simulatorWithConfig, tempDir } from '../cli/helpers.js';
import { PG_URL } from '../helpers/ledgers.js';
import { createPgSchemaOn, pgAdmin } from '../helpers/pg-schema.js';
import { hostEnv, ownerOnly, prefixed } from './host-env.js';
import { launchHost, waitUntil } from './host-process.js';

const occupied: Server[] = [];
afterEach(async () => {
  await Promise.all(occupied.splice(0).map((server) => new Promise((resolve) => server.close(resolve))));
});

/** A loopback port held open by the test, so that a host that tried to listen on it would fail with EADDRINUSE. */
async function occupiedPort(): Promise<number> {
  const server = createServer();
  occupied.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as { port: number }).port;
}

describe('hermes-aip host: settings', { timeout: 60_000 }, () => {
  it('prints its help', async () => {
    const run = await runCli(['host', '--help']);
    expect(run.code).toBe(0);
    expect(run.stdout).toContain('Usage: hermes-aip host [--config FILE] [--print-did]');
  });

  it('prints the did:key of its seed with --print-did, needing nothing else', async () => {
    const env = hostEnv();
    const run = await runCli(['host', '--print-did'], { env: { AIP_CONNECTOR_HOST_SIGNING_SEED_FILE: env.settings['SIGNING_SEED_FILE']! } });
    expect(run.code).toBe(0);
    expect(run.stdout).toBe(`${env.did}\n`);
    expect(run.stderr).toBe('');
    expect(run.stdout).not.toContain(env.seedHex);
  });

  it('refuses --print-did without a seed file, naming the variable', async () => {
    const run = await runCli(['host', '--print-did']);
    expect(run.code).toBe(2);
    expectOneErrorLine(run.stderr, /^hermes-aip: AIP_CONNECTOR_HOST_SIGNING_SEED_FILE: is required$/);
  });

  it.each([
    ['PUBLIC_ENDPOINT', { PUBLIC_ENDPOINT: 'http://127.0.0.1:8081/aip/v1/message' }],
    ['CONTROL_DID', { CONTROL_DID: 'did:key:nope' }],
    ['HEARTBEAT_MS', { HEARTBEAT_MS: '20000' }],
    ['REPLICA_ID', { REPLICA_ID: 'replica-1' }],
  ])('exits 2 with one line naming %s, before it listens', async (variable, overrides) => {
    const { configPath } = await simulatorWithConfig({}, { tenantId: 'tenant-acme' });
    const port = await occupiedPort();
    const env = hostEnv({ BIND: `127.0.0.1:${port}`, ...overrides });
    const run = await runCli(['host', '--config', configPath], {
      env: { ...prefixed(env.settings), HERMES_LEDGER: `sqlite:${join(env.folder, 'ledger.sqlite')}` },
    });
    expect(run.code).toBe(2);
    expectOneErrorLine(run.stderr, new RegExp(`^hermes-aip: AIP_CONNECTOR_HOST_${variable}: `));
  });

  it('never quotes the seed file when it is malformed', async () => {
    const env = hostEnv();
    const seed = ownerOnly(env.folder, 'bad.seed', `${env.seedHex}ff\n`);
    const run = await runCli(['host'], {
      env: { ...prefixed({ ...env.settings, SIGNING_SEED_FILE: seed }), HERMES_BASE_URL: 'http://127.0.0.1:9', HERMES_API_KEY: 'k' },
    });
    expect(run.code).toBe(2);
    expectOneErrorLine(run.stderr, /AIP_CONNECTOR_HOST_SIGNING_SEED_FILE: the file must hold exactly 64 hexadecimal characters/);
    expect(run.stderr).not.toContain(env.seedHex.slice(0, 16));
  });

  it('refuses to run without a durable run ledger', async () => {
    const { configPath } = await simulatorWithConfig({}, { tenantId: 'tenant-acme' });
    const env = hostEnv({ BIND: `127.0.0.1:${await occupiedPort()}` });
    const run = await runCli(['host', '--config', configPath], { env: prefixed(env.settings) });
    expect(run.code).toBe(2);
    expectOneErrorLine(run.stderr, /^hermes-aip: AIP_CONNECTOR_HOST_DATABASE_URL_FILE: is required: a host needs a durable run ledger/);
  });

  it('refuses an endpoint bound to another tenant', async () => {
    const { configPath } = await simulatorWithConfig({}, { tenantId: 'tenant-other' });
    const env = hostEnv();
    const run = await runCli(['host', '--config', configPath], {
      env: { ...prefixed(env.settings), HERMES_LEDGER: `sqlite:${join(env.folder, 'ledger.sqlite')}` },
    });
    expect(run.code).toBe(2);
    expectOneErrorLine(run.stderr, /AIP_CONNECTOR_HOST_TENANT_ID: endpoint "local" is bound to another tenant/);
  });

  it('exits 1 with the reason when it cannot listen', async () => {
    const { configPath } = await simulatorWithConfig({}, { tenantId: 'tenant-acme' });
    const port = await occupiedPort();
    const env = hostEnv({ BIND: `127.0.0.1:${port}` });
    const run = await runCli(['host', '--config', configPath], {
      env: { ...prefixed(env.settings), HERMES_LEDGER: `sqlite:${join(env.folder, 'ledger.sqlite')}` },
    });
    expect(run.code).toBe(1);
    expect(run.stderr).toContain(`hermes-aip: cannot listen on 127.0.0.1:${port}: EADDRINUSE`);
  });
});

describe('hermes-aip host: its PostgreSQL ledger', { timeout: 60_000 }, () => {
  it('exits 1 when the database cannot be reached, without printing its URL', async () => {
    const { configPath } = await simulatorWithConfig({}, { tenantId: 'tenant-acme' });
    const env = hostEnv({ BIND: `127.0.0.1:${await occupiedPort()}` });
    const urlFile = ownerOnly(env.folder, 'db.url', 'postgres://aip:s3cr3t-pa55@127.0.0.1:1/aip\n');
    const run = await runCli(['host', '--config', configPath], { env: prefixed({ ...env.settings, DATABASE_URL_FILE: urlFile }) });
    expect(run.code).toBe(1);
    expectOneErrorLine(run.stderr, /^hermes-aip: cannot open the run ledger: /);
    expect(run.stderr).not.toContain('s3cr3t');
  });

  it.skipIf(PG_URL === undefined)('serves from the PostgreSQL ledger of DATABASE_URL_FILE, before HERMES_LEDGER', async () => {
    const schema = await createPgSchemaOn(PG_URL!, 'host_cli');
    try {
      const { configPath } = await simulatorWithConfig({}, { tenantId: 'tenant-acme' });
      const folder = tempDir();
      const { base, child, exit } = await launchHost(configPath, { DATABASE_URL_FILE: ownerOnly(folder, 'db.url', `${schema.connectionString}\n`) });
      await waitUntil(async () => (await fetch(`${base}/ready`)).status === 200, 'readiness');
      // Replicas share a PostgreSQL ledger: the reference's `RuntimeStoreDurability::DurableShared`.
      expect(((await (await fetch(`${base}/ready`)).json()) as { runtime: object }).runtime).toMatchObject({ durability: 'durable_shared' });
      const tables = await pgAdmin(PG_URL!, `SELECT table_name FROM information_schema.tables WHERE table_schema = '${schema.name}'`);
      expect(tables.length).toBeGreaterThan(0);
      child.kill('SIGTERM');
      expect((await exit).code).toBe(0);
    } finally {
      await schema.drop();
    }
  });
});

describe('hermes-aip host: lifecycle', { timeout: 60_000 }, () => {
  it('registers, serves ready, and on SIGTERM drains then goes offline and exits 0', async () => {
    const { configPath } = await simulatorWithConfig({}, { tenantId: 'tenant-acme' });
    const { base, port, env, stub, child, exit, startLine } = await launchHost(configPath, { DRAIN_TIMEOUT_MS: '2000' });
    expect(startLine).toMatchObject({ msg: 'AIP connector host listening', address: `127.0.0.1:${port}`, did: env.did });

    const ready = await fetch(`${base}/ready`);
    const readyBody = (await ready.json()) as Record<string, any>;
    expect(ready.status, JSON.stringify(readyBody)).toBe(200);
    // `RuntimeStoreDurability` as the reference serialises it (snake_case): a SQLite ledger serves one process.
    expect(readyBody).toMatchObject({
      status: 'ready',
      lease_valid: true,
      draining: false,
      runtime: { durability: 'durable_single_process', ready: true },
      connector: { ready: true },
    });
    const manifest = (await (await fetch(`${base}/aip/v1/manifest`)).json()) as Record<string, any>;
    expect(manifest.agent).toEqual({
      id: 'agent:hermes_agent:connector',
      kind: 'agent',
      display_name: 'Hermes Agent connector',
      trust_domain: 'connectors.test',
    });
    const [register] = stub.records.filter((record) => record.operation === 'register');
    // A host serves one tenant: its endpoints are bound to it, which also keeps the journal's takeover within it.
    expect(manifest.compatibility.tenant_bound_endpoints).toEqual(manifest.compatibility.endpoints);
    expect(register?.verified).toBe(true);
    expect(register!.payload['capability_count']).toBe(manifest.capabilities.length);
    expect(register!.payload['manifest_digest']).toBe(manifestDigest(manifest));

    await waitUntil(() => stub.records.some((record) => record.operation === 'heartbeat'), 'a heartbeat');
    let releaseDrain = (): void => {};
    stub.hold = (record) => (record.operation === 'drain' ? new Promise<void>((resolve) => (releaseDrain = resolve)) : undefined);
    child.kill('SIGTERM');
    await waitUntil(() => stub.records.some((record) => record.operation === 'drain'), 'the drain');
    const draining = await fetch(`${base}/ready`);
    expect(draining.status).toBe(503);
    expect(await draining.json()).toMatchObject({ status: 'not_ready', draining: true });
    releaseDrain();

    const run = await exit;
    expect(run.code, run.stderr).toBe(0);
    const operations = stub.records.map((record) => record.operation);
    expect(operations.indexOf('drain')).toBeGreaterThan(operations.lastIndexOf('heartbeat'));
    expect(operations.at(-1)).toBe('offline');
    const granted = stub.records.filter((record) => record.operation !== 'drain' && record.operation !== 'offline').at(-1)!;
    const drain = stub.records.find((record) => record.operation === 'drain')!;
    const offline = stub.records.find((record) => record.operation === 'offline')!;
    expect(drain.payload).toEqual({ replica_id: 'crepl_hermes_acme_1', previous_sequence: granted.granted });
    expect(offline.payload).toEqual({ replica_id: 'crepl_hermes_acme_1', previous_sequence: drain.granted });
    expect(stub.records.every((record) => record.verified)).toBe(true);
  });

  it('starts not ready when the control plane is down, and registers once it answers', async () => {
    const { configPath } = await simulatorWithConfig({}, { tenantId: 'tenant-acme' });
    const { base, stub, child, exit } = await launchHost(configPath, {}, (control) => {
      control.answer = () => 'drop';
    });
    expect((await fetch(`${base}/ready`)).status).toBe(503);
    expect((await fetch(`${base}/health`)).status).toBe(200);
    stub.answer = () => 'grant';
    await waitUntil(async () => (await fetch(`${base}/ready`)).status === 200, 'readiness');
    const metrics = await (await fetch(`${base}/metrics`)).text();
    expect(metrics).toContain('aip_connector_host_ready 1\n');
    expect(metrics).toMatch(/aip_connector_host_lease_recoveries_total 1\n/);
    child.kill('SIGTERM');
    expect((await exit).code).toBe(0);
  });
});
