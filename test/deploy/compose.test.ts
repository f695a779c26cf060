/**
 * deploy/compose: the two replicas' services hold what `hermes-aip host` reads and nothing else, their
 * settings load, every `_FILE` is a declared secret, the hardening is there, the health check passes
 * against a running host and fails without one, and no file holds a real secret.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { load } from 'js-yaml';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/cli/config.js';
import { shutdownBudgetMs } from '../../src/host/settings.js';
import { freePort } from '../host/host-process.js';
import { launchHostOverFaultHermes } from '../host/fault-hermes-host.js';
import { hostFolder, ownerOnly } from '../host/host-env.js';
import {
  DEPLOY_ROOT,
  fileVariables,
  runNodeProbe,
  seconds,
  secretLike,
  settingsWithStandIns,
  trackedDeployFiles,
  unknownHostVariables,
} from './deployment-checks.js';

interface Service {
  image: string;
  user?: string;
  read_only?: boolean;
  cap_drop?: string[];
  security_opt?: string[];
  tmpfs?: string[];
  environment?: Record<string, string>;
  secrets?: string[];
  configs?: Array<{ source: string; target: string }>;
  command?: string[];
  stop_grace_period?: string;
  healthcheck?: { test: string[] };
  networks?: Record<string, { aliases?: string[] }> | string[];
}

interface Compose {
  services: Record<string, Service>;
  secrets: Record<string, { file: string }>;
  configs: Record<string, { file: string }>;
}

const COMPOSE_FOLDER = join(DEPLOY_ROOT, 'compose');
/** What an operator exports before `docker compose up` (docs/deploy.md). */
const INTERPOLATED: Record<string, string> = {
  HERMES_AIP_IMAGE_DIGEST: `sha256:${'a'.repeat(64)}`,
  AIP_CONTROL_PLANE_IMAGE: 'getaip/aip-connector-control-plane:2',
  AIP_SERVER_IMAGE: 'getaip/server:2',
};

/** The compose file as Compose reads it: `${NAME:?…}` and `${NAME:-…}` interpolated. */
function compose(): Compose {
  const text = readFileSync(join(COMPOSE_FOLDER, 'compose.yml'), 'utf8').replace(/\$\{(\w+)(?::[?-][^}]*)?\}/g, (_whole, name: string) => {
    const value = INTERPOLATED[name];
    if (value === undefined) throw new Error(`compose.yml interpolates ${name}, which docs/deploy.md does not tell the operator to set`);
    return value;
  });
  return load(text) as Compose;
}

function hostServices(file: Compose): Array<[string, Service]> {
  return Object.entries(file.services).filter(([, service]) => service.image.startsWith('hermes-aip-host:'));
}

const SECRET_MOUNT = /^\/run\/secrets\/([\w.-]+)$/;

describe('deploy/compose', () => {
  const file = compose();
  const hosts = hostServices(file);

  it('runs two replicas of one instance, each with its own replica id, seed and public endpoint', () => {
    expect(hosts.map(([name]) => name)).toEqual(['hermes-aip-host-a', 'hermes-aip-host-b']);
    const settings = hosts.map(([, service]) => settingsWithStandIns(service.environment ?? {}));
    expect(new Set(settings.map((each) => each.replicaId)).size).toBe(2);
    expect(new Set(settings.map((each) => each.publicEndpoint)).size).toBe(2);
    expect(new Set(hosts.map(([, service]) => service.environment?.['AIP_CONNECTOR_HOST_SIGNING_SEED_FILE'])).size).toBe(2);
    expect(new Set(settings.map((each) => each.instanceId)).size).toBe(1);
    expect(new Set(hosts.map(([, service]) => service.environment?.['AIP_CONNECTOR_HOST_DATABASE_URL_FILE'])).size).toBe(1);
    for (const each of settings) expect(each.databaseUrl, 'both replicas share one PostgreSQL ledger').toBeDefined();
  });

  it.each(hostServices(compose()))('%s sets only variables the host reads, and its settings load', (_name, service) => {
    const env = service.environment ?? {};
    expect(unknownHostVariables(env)).toEqual([]);
    expect(() => settingsWithStandIns(env)).not.toThrow();
  });

  it.each(hostServices(compose()))('%s takes every secret as a file of a declared secret mounted in it', (_name, service) => {
    const files = fileVariables(service.environment ?? {});
    expect(files.map(([name]) => name)).toEqual(expect.arrayContaining(['AIP_CONNECTOR_HOST_SIGNING_SEED_FILE', 'AIP_CONNECTOR_HOST_DATABASE_URL_FILE']));
    for (const [variable, path] of files) {
      const secret = SECRET_MOUNT.exec(path)?.[1];
      expect(secret, `${variable} is not under /run/secrets`).toBeDefined();
      expect(service.secrets, variable).toContain(secret);
      expect(file.secrets[secret as string], variable).toBeDefined();
    }
    for (const secret of service.secrets ?? []) expect(file.secrets[secret]?.file, secret).toMatch(/^\.\/secrets\//);
  });

  it.each(hostServices(compose()))('%s reads a Hermes endpoints file whose API key is one of its secrets', (_name, service) => {
    const config = service.configs?.[0] as { source: string; target: string };
    expect(service.command).toEqual(['host', '--config', config.target]);
    const endpoints = JSON.parse(readFileSync(join(COMPOSE_FOLDER, file.configs[config.source]?.file as string), 'utf8')) as {
      endpoints: Array<{ apiKeyFile: string }>;
    };
    const folder = hostFolder();
    for (const endpoint of endpoints.endpoints) {
      const secret = SECRET_MOUNT.exec(endpoint.apiKeyFile)?.[1] as string;
      expect(service.secrets).toContain(secret);
      endpoint.apiKeyFile = ownerOnly(folder, secret, 'stand-in-hermes-key\n');
    }
    const standIn = ownerOnly(folder, 'endpoints.json', JSON.stringify(endpoints));
    const tenant = service.environment?.['AIP_CONNECTOR_HOST_TENANT_ID'];
    for (const endpoint of loadConfig(standIn, {}).endpoints) expect(endpoint.config.tenantId).toBe(tenant);
  });

  it.each(hostServices(compose()))('%s runs as uid 10001 on a read-only root, a tmpfs /tmp, no capability, and is given its drain', (_name, service) => {
    expect(service.user).toBe('10001:10001');
    expect(service.read_only).toBe(true);
    expect(service.cap_drop).toEqual(['ALL']);
    expect(service.security_opt).toContain('no-new-privileges:true');
    expect(service.tmpfs?.some((mount) => mount.split(':')[0] === '/tmp')).toBe(true);
    const settings = settingsWithStandIns(service.environment ?? {});
    expect(seconds(service.stop_grace_period as string)).toBeGreaterThanOrEqual(Math.ceil(shutdownBudgetMs(settings.limits) / 1000));
  });

  it('is reached through the TLS edge: one site per public name, each host behind its own', () => {
    const caddyfile = readFileSync(join(COMPOSE_FOLDER, 'Caddyfile'), 'utf8');
    const aliases = (file.services['edge']?.networks as Record<string, { aliases: string[] }>)['aip']?.aliases ?? [];
    for (const [name, service] of hosts) {
      const settings = settingsWithStandIns(service.environment ?? {});
      for (const endpoint of [settings.publicEndpoint, settings.controlEndpoint, settings.callback?.url as string]) {
        const url = new URL(endpoint);
        expect(url.protocol).toBe('https:');
        expect(aliases).toContain(url.hostname);
        expect(caddyfile).toContain(`https://${url.host} {`);
      }
      const site = caddyfile.slice(caddyfile.indexOf(`https://${new URL(settings.publicEndpoint).host} {`)).split('\n}\n')[0];
      expect(site).toContain(`reverse_proxy ${name}:${settings.bind.port}`);
      expect(site).toContain('handle /aip/v1/* {');
    }
  });

  it('keeps every secret out of the folder: declared secrets are files under ./secrets, which git ignores', () => {
    for (const { file: path } of Object.values(file.secrets)) expect(path).toMatch(/^\.\/secrets\//);
    expect(readFileSync(join(COMPOSE_FOLDER, '.gitignore'), 'utf8').split('\n')).toContain('secrets/');
    const files = trackedDeployFiles();
    expect(files.map(({ path }) => path)).toContain('deploy/compose/compose.yml');
    for (const { path, text } of files) {
      expect(path).not.toMatch(/\/secrets\//);
      expect(secretLike(text), path).toEqual([]);
    }
  });
});

describe('deploy/compose: the health check', { timeout: 60_000 }, () => {
  const [, service] = hostServices(compose())[0] as [string, Service];
  const [kind, node, flag, script] = service.healthcheck?.test ?? [];

  it('passes against a running host on /health, and fails when nothing answers', async () => {
    expect([kind, node, flag]).toEqual(['CMD', '/usr/bin/node', '-e']);
    expect(script).toContain("'http://127.0.0.1:8081/health'");
    const host = await launchHostOverFaultHermes({});
    expect(runNodeProbe(script as string, 'http://127.0.0.1:8081', host.base)).toBe(0);
    expect(runNodeProbe(script as string, 'http://127.0.0.1:8081', `http://127.0.0.1:${await freePort()}`)).toBe(1);
  });
});
