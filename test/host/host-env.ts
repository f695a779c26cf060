/** A complete, valid set of AIP_CONNECTOR_HOST_* variables for one loopback replica, its seed in an owner-only file. */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach } from 'vitest';
import { type SigningKey, signingKeyFromSeed } from '../../src/host/wire/keys.js';

const folders: string[] = [];
afterEach(() => {
  for (const folder of folders.splice(0)) rmSync(folder, { recursive: true, force: true });
});

export function hostFolder(): string {
  const folder = mkdtempSync(join(tmpdir(), 'hermes-aip-host-test-'));
  folders.push(folder);
  return folder;
}

export function ownerOnly(folder: string, name: string, text: string, mode = 0o600): string {
  const path = join(folder, name);
  writeFileSync(path, text, { mode });
  return path;
}

export interface HostEnv {
  readonly folder: string;
  readonly seedHex: string;
  readonly did: string;
  readonly gatewayDid: string;
  /** The gateway's key: it signs the actions a test sends. */
  readonly gatewayKey: SigningKey;
  /** The variables, without the AIP_CONNECTOR_HOST_ prefix. */
  readonly settings: Record<string, string>;
}

export function hostEnv(overrides: Record<string, string> = {}): HostEnv {
  const folder = hostFolder();
  const seedHex = randomBytes(32).toString('hex');
  const gatewayKey = signingKeyFromSeed(randomBytes(32));
  const gatewayDid = gatewayKey.did;
  const controlDid = signingKeyFromSeed(randomBytes(32)).did;
  return {
    folder,
    seedHex,
    did: signingKeyFromSeed(Buffer.from(seedHex, 'hex')).did,
    gatewayDid,
    gatewayKey,
    settings: {
      BIND: '127.0.0.1:0',
      PUBLIC_ENDPOINT: 'http://127.0.0.1:8081/aip/v1/messages',
      ALLOW_LOOPBACK_HTTP: 'true',
      CONTROL_ENDPOINT: 'http://127.0.0.1:9/aip/v1/connector-control',
      CONTROL_DID: controlDid,
      SIGNING_SEED_FILE: ownerOnly(folder, 'host.seed', `${seedHex}\n`),
      GATEWAY_PRINCIPAL_ID: 'service:getaip:server',
      GATEWAY_DID: gatewayDid,
      TRUST_DOMAIN: 'connectors.test',
      TENANT_ID: 'tenant-acme',
      TYPE_ID: 'ctype_hermes_agent',
      VERSION_ID: 'cver_hermes_1',
      INSTANCE_ID: 'cinst_hermes_acme',
      REPLICA_ID: 'crepl_hermes_acme_1',
      MEMBERSHIP_ID: 'membership-hermes-acme',
      ARTIFACT_DIGEST: `sha256:${'1'.repeat(64)}`,
      SECRET_PROVIDER_REF: 'secret://tenant-acme/hermes',
      ...overrides,
    },
  };
}

/** The variables with their prefix, as a process environment. */
export function prefixed(settings: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.entries(settings).map(([name, value]) => [`AIP_CONNECTOR_HOST_${name}`, value]));
}
