/**
 * deploy/kubernetes: the StatefulSet's pods hold what `hermes-aip host` reads and nothing else, each
 * pod's settings load with its own replica id, the init container really turns the Secret into the
 * owner-only files the variables name, the probes' paths answer on a running host, and the grace
 * period covers the drain.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { loadAll } from 'js-yaml';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/cli/config.js';
import { shutdownBudgetMs } from '../../src/host/settings.js';
import { launchHostOverFaultHermes } from '../host/fault-hermes-host.js';
import { hostFolder, ownerOnly } from '../host/host-env.js';
import { waitUntil } from '../host/host-process.js';
import { DEPLOY_ROOT, fileVariables, settingsWithStandIns, unknownHostVariables } from './deployment-checks.js';

interface EnvEntry {
  name: string;
  value?: string;
  valueFrom?: { fieldRef?: { fieldPath: string } };
}

interface Container {
  name: string;
  image: string;
  command?: string[];
  args?: string[];
  env?: EnvEntry[];
  securityContext?: { allowPrivilegeEscalation?: boolean; readOnlyRootFilesystem?: boolean; capabilities?: { drop?: string[] } };
  volumeMounts?: Array<{ name: string; mountPath: string; readOnly?: boolean }>;
  livenessProbe?: { httpGet: { path: string; port: string } };
  readinessProbe?: { httpGet: { path: string; port: string }; timeoutSeconds: number };
}

interface PodSpec {
  terminationGracePeriodSeconds: number;
  securityContext: { runAsUser: number; runAsGroup: number; runAsNonRoot: boolean };
  initContainers: Container[];
  containers: Container[];
  volumes: Array<{ name: string; emptyDir?: { medium?: string }; secret?: { secretName: string }; configMap?: { name: string } }>;
}

interface Resource {
  kind: string;
  metadata: { name: string };
  spec: Record<string, any>;
  data?: Record<string, string>;
}

const POD_INDEX_LABEL = "metadata.labels['apps.kubernetes.io/pod-index']";
/** What docs/deploy.md tells the operator to replace. */
const IMAGE_DIGEST = `sha256:${'b'.repeat(64)}`;

const resources = loadAll(
  readFileSync(join(DEPLOY_ROOT, 'kubernetes/hermes-aip-host.yaml'), 'utf8').replaceAll('sha256:IMAGE_DIGEST', IMAGE_DIGEST),
) as Resource[];
const byKind = (kind: string) => resources.find((resource) => resource.kind === kind) as Resource;
const statefulSet = byKind('StatefulSet');
const pod = statefulSet.spec['template'].spec as PodSpec;
const host = pod.containers.find((container) => container.name === 'hermes-aip-host') as Container;
const init = pod.initContainers.find((container) => container.name === 'secret-files') as Container;
const replicas = statefulSet.spec['replicas'] as number;

/**
 * The container's environment in pod `index`, as the kubelet gives it: downward-API values filled in
 * and `$(NAME)` references expanded; `helpers` are the downward-API names (not host variables).
 */
function podEnv(container: Container, index: number): { env: Record<string, string>; helpers: string[] } {
  const env: Record<string, string> = {};
  const helpers: string[] = [];
  for (const entry of container.env ?? []) {
    if (entry.valueFrom !== undefined) {
      expect(entry.valueFrom.fieldRef?.fieldPath).toBe(POD_INDEX_LABEL);
      env[entry.name] = String(index);
      helpers.push(entry.name);
    } else {
      env[entry.name] = (entry.value ?? '').replace(/\$\((\w+)\)/g, (whole, name: string) => env[name] ?? whole);
    }
  }
  return { env, helpers };
}

function hostEnvOf(index: number): Record<string, string> {
  const { env, helpers } = podEnv(host, index);
  return Object.fromEntries(Object.entries(env).filter(([name]) => !helpers.includes(name)));
}

function mountOf(container: Container, volume: string): string {
  return container.volumeMounts?.find((mount) => mount.name === volume)?.mountPath as string;
}

describe('deploy/kubernetes', () => {
  it('runs two pods, each a replica of one instance with its own replica id and public endpoint', () => {
    expect(replicas).toBe(2);
    const settings = Array.from({ length: replicas }, (_, index) => settingsWithStandIns(hostEnvOf(index)));
    expect(settings.map((each) => each.replicaId)).toEqual(['crepl_hermes_acme_0', 'crepl_hermes_acme_1']);
    expect(new Set(settings.map((each) => each.publicEndpoint)).size).toBe(2);
    expect(new Set(settings.map((each) => each.instanceId)).size).toBe(1);
    for (const each of settings) expect(each.artifactDigest).toBe(IMAGE_DIGEST);
  });

  it('sets only variables the host reads (and the pod index they are built from)', () => {
    for (let index = 0; index < replicas; index++) expect(unknownHostVariables(hostEnvOf(index))).toEqual([]);
  });

  it('is published to its peers while not ready, so that a draining pod still gets its cancels', () => {
    const service = byKind('Service');
    expect(service.spec['clusterIP']).toBe('None');
    expect(service.spec['publishNotReadyAddresses']).toBe(true);
    expect(statefulSet.spec['serviceName']).toBe(service.metadata.name);
    expect(service.spec['selector']).toEqual(statefulSet.spec['template'].metadata.labels);
  });

  it('runs as uid 10001 on a read-only root with a memory /tmp, no capability, no escalation', () => {
    expect(pod.securityContext).toMatchObject({ runAsUser: 10001, runAsGroup: 10001, runAsNonRoot: true });
    for (const container of [host, init]) {
      expect(container.securityContext).toEqual({ allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ['ALL'] } });
    }
    const tmp = host.volumeMounts?.find((mount) => mount.mountPath === '/tmp');
    expect(pod.volumes.find((volume) => volume.name === tmp?.name)?.emptyDir?.medium).toBe('Memory');
    expect(host.image).toBe(init.image);
    expect(host.image.endsWith(`@${IMAGE_DIGEST}`)).toBe(true);
  });

  it('gives the host its drain and the readiness probe its health timeout', () => {
    const settings = settingsWithStandIns(hostEnvOf(0));
    expect(pod.terminationGracePeriodSeconds).toBeGreaterThanOrEqual(Math.ceil(shutdownBudgetMs(settings.limits) / 1000));
    expect(host.readinessProbe?.timeoutSeconds ?? 0).toBeGreaterThan(settings.limits.healthTimeoutMs / 1000);
  });

  it('turns the Secret into owner-only files of uid 10001, one per file variable, the seed of its own pod', () => {
    const folder = hostFolder();
    const secretsIn = join(folder, 'secrets-in');
    const secretFiles = join(folder, 'secret-files');
    mkdirSync(secretsIn);
    mkdirSync(secretFiles);
    const keys = ['seed-0', 'seed-1', 'database-url', 'hermes-api-key', 'control-plane-did', 'gateway-did', 'edge-ca'];
    for (const key of keys) writeFileSync(join(secretsIn, key), `key ${key}\n`, { mode: 0o440 });
    const inPod = mountOf(init, 'secret-files');
    expect(mountOf(host, 'secret-files')).toBe(inPod);
    const [shell, flag, script] = init.command as string[];
    const { env } = podEnv({ ...init, env: [...(init.env ?? []), { name: 'SCRIPT', value: script as string }] }, 1);
    const local = (env['SCRIPT'] as string).replaceAll(mountOf(init, 'secrets-in'), secretsIn).replaceAll(inPod, secretFiles);
    execFileSync(shell as string, [flag as string, local]);
    for (const [variable, path] of fileVariables(hostEnvOf(1))) {
      expect(path.startsWith(`${inPod}/`), variable).toBe(true);
      const copied = join(secretFiles, path.slice(inPod.length + 1));
      expect(statSync(copied).mode & 0o777, variable).toBe(0o600);
      expect(statSync(copied).uid, variable).toBe(process.getuid?.());
    }
    expect(readFileSync(join(secretFiles, 'host-seed'), 'utf8')).toBe('key seed-1\n');
  });

  it('reads its Hermes endpoints from the ConfigMap, the API key from one of those files', () => {
    const configMount = mountOf(host, 'endpoints');
    expect(host.args).toEqual(['host', '--config', `${configMount}/endpoints.json`]);
    const endpoints = JSON.parse(byKind('ConfigMap').data?.['endpoints.json'] as string) as { endpoints: Array<{ apiKeyFile: string }> };
    const folder = hostFolder();
    for (const endpoint of endpoints.endpoints) {
      expect(endpoint.apiKeyFile.startsWith(`${mountOf(host, 'secret-files')}/`)).toBe(true);
      expect(init.command?.[2]).toContain(endpoint.apiKeyFile.split('/').at(-1));
      endpoint.apiKeyFile = ownerOnly(folder, 'hermes-api-key', 'stand-in-hermes-key\n');
    }
    const config = loadConfig(ownerOnly(folder, 'endpoints.json', JSON.stringify(endpoints)), {});
    for (const endpoint of config.endpoints) expect(endpoint.config.tenantId).toBe(hostEnvOf(0)['AIP_CONNECTOR_HOST_TENANT_ID']);
  });
});

describe('deploy/kubernetes: the probes', { timeout: 60_000 }, () => {
  it('probe paths the host serves: liveness /health, readiness /ready', async () => {
    expect(host.livenessProbe?.httpGet.path).toBe('/health');
    expect(host.readinessProbe?.httpGet.path).toBe('/ready');
    const running = await launchHostOverFaultHermes({});
    expect((await fetch(`${running.base}${host.livenessProbe?.httpGet.path}`)).status).toBe(200);
    await waitUntil(async () => (await fetch(`${running.base}${host.readinessProbe?.httpGet.path}`)).status === 200, 'readiness');
  });
});
