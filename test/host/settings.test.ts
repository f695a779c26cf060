/** Every AIP_CONNECTOR_HOST_* variable: the reference bootstrap's defaults, and a bad value named with what is wrong, never quoting a secret. */
import { chmodSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { inspect } from 'node:util';
import { describe, expect, it } from 'vitest';
import { HOST_VARIABLES, HostSettingError, loadHostSettings, SHUTDOWN_MARGIN_MS, shutdownBudgetMs } from '../../src/host/settings.js';
import { type HostEnv, hostEnv, ownerOnly, prefixed } from './host-env.js';

const SECRET_LOOKING = 'postgres://aip:s3cr3t-pa55@db.internal:5432/aip';

function load(env: HostEnv, overrides: Record<string, string | undefined> = {}) {
  const settings: Record<string, string> = { ...env.settings };
  for (const [name, value] of Object.entries(overrides)) {
    if (value === undefined) delete settings[name];
    else settings[name] = value;
  }
  return loadHostSettings(prefixed(settings));
}

function refusal(env: HostEnv, overrides: Record<string, string | undefined>): HostSettingError {
  try {
    load(env, overrides);
  } catch (error) {
    if (error instanceof HostSettingError) return error;
    throw error;
  }
  throw new Error(`accepted ${JSON.stringify(overrides)}`);
}

describe('host settings', () => {
  it("takes the reference defaults, but a drain timeout that fits Kubernetes' default termination grace", () => {
    const env = hostEnv({
      BIND: '0.0.0.0:8081',
      ALLOW_LOOPBACK_HTTP: '',
      PUBLIC_ENDPOINT: 'https://host.example/aip/v1/messages',
      CONTROL_ENDPOINT: 'https://cp.example/aip/v1/connector-control',
    });
    const settings = load(env, { BIND: undefined });
    expect(settings.bind).toEqual({ host: '0.0.0.0', port: 8081, text: '0.0.0.0:8081' });
    expect(settings.limits).toEqual({
      maxInFlight: 32,
      leaseTtlMs: 30_000,
      heartbeatMs: 10_000,
      drainTimeoutMs: 20_000,
      healthTimeoutMs: 2_000,
      controlTimeoutMs: 5_000,
      maxRequestBytes: 4 * 1024 * 1024,
      maxConnections: 2_048,
      bodyBudgetBytes: 32 * 1024 * 1024,
      largeBodyBytes: 64 * 1024,
      authenticationHeapMb: 256,
    });
    expect(settings.topology).toEqual({ region: 'global', zone: 'default', capacity_class: 'standard' });
    expect(settings.configRevision).toBe(1);
    expect(settings.signingKey.did).toBe(env.did);
    expect(settings.callback).toBeUndefined();
    expect(settings.databaseUrl).toBeUndefined();
  });

  it("by default exits within Kubernetes' default 30 s termination grace; a longer drain needs a longer one", () => {
    const env = hostEnv();
    expect(shutdownBudgetMs(load(env).limits)).toBeLessThan(30_000);
    expect(shutdownBudgetMs(load(env, { DRAIN_TIMEOUT_MS: '60000' }).limits)).toBe(60_000 + SHUTDOWN_MARGIN_MS);
  });

  it('reads DIDs and the database URL from owner-only files, and never prints the seed or the URL', () => {
    const env = hostEnv();
    const settings = load(env, {
      GATEWAY_DID: undefined,
      GATEWAY_DID_FILE: ownerOnly(env.folder, 'gateway.did', `${env.gatewayDid}\n`),
      DATABASE_URL_FILE: ownerOnly(env.folder, 'db.url', `${SECRET_LOOKING}\n`),
      CALLBACK_ENDPOINT: 'http://127.0.0.1:7000/aip/v1/connector-callbacks',
      CALLBACK_ALLOW_HTTP: 'true',
      CALLBACK_ALLOW_PRIVATE: 'true',
    });
    expect(settings.gatewayDid).toBe(env.gatewayDid);
    expect(settings.databaseUrl?.reveal()).toBe(SECRET_LOOKING);
    expect(settings.callback).toEqual({ url: 'http://127.0.0.1:7000/aip/v1/connector-callbacks', allowHttp: true, allowPrivate: true });
    const printed = `${JSON.stringify(settings)} ${inspect(settings, { depth: 5 })}`;
    expect(printed).not.toContain('s3cr3t');
    expect(printed).not.toContain(env.seedHex);
  });

  it('lists every variable it reads in docs/aip-host.md', async () => {
    const { readFileSync } = await import('node:fs');
    const docs = readFileSync(new URL('../../docs/aip-host.md', import.meta.url), 'utf8');
    for (const variable of HOST_VARIABLES) expect(docs).toContain(`AIP_CONNECTOR_HOST_${variable.name}\``);
  });
});

const BAD: Array<[string, Record<string, string | undefined>, RegExp]> = [
  ['PUBLIC_ENDPOINT', { PUBLIC_ENDPOINT: undefined }, /is required/],
  ['PUBLIC_ENDPOINT', { PUBLIC_ENDPOINT: 'http://127.0.0.1:8081/aip/v1/messages/' }, /ending exactly in \/aip\/v1\/messages/],
  ['PUBLIC_ENDPOINT', { PUBLIC_ENDPOINT: 'http://127.0.0.1:8081/aip/v1/messages?x=1' }, /without credentials, query or fragment/],
  ['PUBLIC_ENDPOINT', { PUBLIC_ENDPOINT: 'http://127.0.0.1:8081/aip/v1/messages#f' }, /without credentials, query or fragment/],
  ['PUBLIC_ENDPOINT', { PUBLIC_ENDPOINT: 'http://user:hunter2@127.0.0.1:8081/aip/v1/messages' }, /without credentials/],
  ['PUBLIC_ENDPOINT', { PUBLIC_ENDPOINT: 'http://host.example/aip/v1/messages' }, /requires https/],
  ['PUBLIC_ENDPOINT', { PUBLIC_ENDPOINT: 'not a url' }, /absolute URL/],
  ['PUBLIC_ENDPOINT', { ALLOW_LOOPBACK_HTTP: undefined }, /requires https/],
  ['ALLOW_LOOPBACK_HTTP', { BIND: '0.0.0.0:8081' }, /loopback/],
  ['ALLOW_LOOPBACK_HTTP', { ALLOW_LOOPBACK_HTTP: 'yes' }, /true or false/],
  ['BIND', { BIND: 'localhost:8081' }, /IP socket address/],
  ['BIND', { BIND: '127.0.0.1:70000' }, /IP socket address/],
  ['CONTROL_ENDPOINT', { CONTROL_ENDPOINT: 'http://127.0.0.1:9/aip/v1/messages' }, /\/aip\/v1\/connector-control/],
  ['CONTROL_ENDPOINT', { CONTROL_ENDPOINT: undefined }, /is required/],
  ['CONTROL_DID', { CONTROL_DID: 'did:web:control.example' }, /did:key/],
  ['CONTROL_DID', { CONTROL_DID: undefined }, /is required/],
  ['GATEWAY_DID', { GATEWAY_DID: 'did:key:z6MkNOTBASE58000000000000000000000000000000000' }, /did:key/],
  ['CALLBACK_ENDPOINT', { CALLBACK_ENDPOINT: 'https://central.example/aip/v1/connector-callback' }, /\/aip\/v1\/connector-callbacks/],
  ['CALLBACK_ENDPOINT', { CALLBACK_ENDPOINT: 'http://central.example/aip/v1/connector-callbacks' }, /CALLBACK_ALLOW_HTTP/],
  ['CALLBACK_ENDPOINT', { CALLBACK_ENDPOINT: 'https://10.0.0.7/aip/v1/connector-callbacks' }, /CALLBACK_ALLOW_PRIVATE/],
  ['CALLBACK_ENDPOINT', { CALLBACK_ALLOW_HTTP: 'true' }, /is required when/],
  ['EVENT_ENDPOINT', { EVENT_ENDPOINT: 'https://central.example/aip/v1/connector-callbacks' }, /\/aip\/v1\/connector-events/],
  ['SIGNING_SEED_FILE', { SIGNING_SEED_FILE: undefined }, /is required/],
  ['SIGNING_SEED_FILE', { SIGNING_SEED_FILE: '/nonexistent/host.seed' }, /file not found/],
  ['GATEWAY_PRINCIPAL_ID', { GATEWAY_PRINCIPAL_ID: undefined }, /is required/],
  ['TRUST_DOMAIN', { TRUST_DOMAIN: 'x'.repeat(254) }, /1 to 253 bytes/],
  ['TENANT_ID', { TENANT_ID: '   ' }, /1 to 512 bytes/],
  ['MEMBERSHIP_ID', { MEMBERSHIP_ID: undefined }, /is required/],
  ['TYPE_ID', { TYPE_ID: 'hermes' }, /ctype_/],
  ['VERSION_ID', { VERSION_ID: 'v1' }, /cver_/],
  ['INSTANCE_ID', { INSTANCE_ID: 'cinst_' }, /cinst_/],
  ['REPLICA_ID', { REPLICA_ID: 'crepl_a b' }, /crepl_/],
  ['ARTIFACT_DIGEST', { ARTIFACT_DIGEST: 'sha256:abc' }, /sha256 digest/],
  ['SECRET_PROVIDER_REF', { SECRET_PROVIDER_REF: undefined }, /is required/],
  ['CONFIG_REVISION', { CONFIG_REVISION: '0' }, /integer from 1/],
  ['EXTERNAL_ACCOUNT_SYSTEM', { EXTERNAL_ACCOUNT_ID: 'acct-1' }, /together/],
  ['CREDENTIAL_ID', { CREDENTIAL_ID: 'cred-1' }, /together/],
  ['CREDENTIAL_SCOPES', { CREDENTIAL_ID: 'c', CREDENTIAL_ISSUER: 'i', CREDENTIAL_REVISION: 'r1', CREDENTIAL_SCOPES: 'a,,b' }, /non-empty scope/],
  ['MAX_IN_FLIGHT', { MAX_IN_FLIGHT: '0' }, /integer from 1/],
  ['MAX_IN_FLIGHT', { MAX_IN_FLIGHT: '12x' }, /integer/],
  ['MAX_CONNECTIONS', { MAX_CONNECTIONS: '0' }, /integer from 1 to 1000000/],
  ['BODY_BUDGET_BYTES', { BODY_BUDGET_BYTES: '1048576' }, /integer from 4194304 to 1073741824/],
  ['LEASE_TTL_MS', { LEASE_TTL_MS: '999' }, /1000 to 300000/],
  ['LEASE_TTL_MS', { LEASE_TTL_MS: '300001' }, /1000 to 300000/],
  ['HEARTBEAT_MS', { HEARTBEAT_MS: '15001' }, /half/],
  ['HEARTBEAT_MS', { HEARTBEAT_MS: '0' }, /integer from 1/],
  ['DRAIN_TIMEOUT_MS', { DRAIN_TIMEOUT_MS: '300001' }, /1 to 300000/],
  ['HEALTH_TIMEOUT_MS', { HEALTH_TIMEOUT_MS: '30001' }, /1 to 30000/],
  ['CONTROL_TIMEOUT_MS', { CONTROL_TIMEOUT_MS: '0' }, /1 to 30000/],
];

describe('bad host settings', () => {
  it.each(BAD)('refuses %s: %j', (variable, overrides, problem) => {
    const error = refusal(hostEnv(), overrides);
    expect(error.variable).toBe(`AIP_CONNECTOR_HOST_${variable}`);
    expect(error.message).toMatch(problem);
    expect(error.message).not.toContain('hunter2');
  });

  it('refuses a seed file that is group-readable, a symbolic link, or not 64 hex characters, without quoting it', () => {
    const env = hostEnv();
    const seedPath = env.settings['SIGNING_SEED_FILE']!;
    chmodSync(seedPath, 0o640);
    expect(refusal(env, {}).message).toMatch(/SIGNING_SEED_FILE: the file must be owner-only/);
    chmodSync(seedPath, 0o600);
    const link = join(env.folder, 'seed-link');
    symlinkSync(seedPath, link);
    expect(refusal(env, { SIGNING_SEED_FILE: link }).message).toMatch(/not a symbolic link/);
    const short = ownerOnly(env.folder, 'short.seed', env.seedHex.slice(1));
    const shortError = refusal(env, { SIGNING_SEED_FILE: short });
    expect(shortError.message).toMatch(/64 hexadecimal characters/);
    expect(shortError.message).not.toContain(env.seedHex.slice(1, 20));
  });

  it('refuses a database URL file that is not owner-only or holds no PostgreSQL URL, without quoting it', () => {
    const env = hostEnv();
    const shared = ownerOnly(env.folder, 'shared.url', SECRET_LOOKING, 0o640);
    expect(refusal(env, { DATABASE_URL_FILE: shared }).message).toMatch(/DATABASE_URL_FILE: the file must be owner-only/);
    const wrong = ownerOnly(env.folder, 'wrong.url', 'mysql://aip:s3cr3t-pa55@db/aip');
    const error = refusal(env, { DATABASE_URL_FILE: wrong });
    expect(error.message).toMatch(/postgres:\/\//);
    expect(error.message).not.toContain('s3cr3t');
  });

  it('refuses a DID given both inline and by file, and a DID file others can read', () => {
    const env = hostEnv();
    const didFile = ownerOnly(env.folder, 'control.did', env.settings['CONTROL_DID']!);
    expect(refusal(env, { CONTROL_DID_FILE: didFile }).message).toMatch(/not both/);
    chmodSync(didFile, 0o644);
    expect(refusal(env, { CONTROL_DID: undefined, CONTROL_DID_FILE: didFile }).message).toMatch(/CONTROL_DID_FILE: the file must be owner-only/);
  });

  it('refuses a TLS CA file others can write or that holds no certificate', () => {
    const env = hostEnv();
    const writable = ownerOnly(env.folder, 'ca.pem', '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n', 0o666);
    chmodSync(writable, 0o666);
    expect(refusal(env, { TLS_CA_FILE: writable }).message).toMatch(/TLS_CA_FILE: the file must not be group or world writable/);
    const notPem = ownerOnly(env.folder, 'ca.txt', 'hello', 0o644);
    expect(refusal(env, { TLS_CA_FILE: notPem }).message).toMatch(/PEM certificate/);
  });

  it('refuses a credential policy file that is not valid or does not authorise the configured revision', () => {
    const env = hostEnv({ CREDENTIAL_ID: 'cred-1', CREDENTIAL_ISSUER: 'issuer', CREDENTIAL_REVISION: 'rev-2', CREDENTIAL_SCOPES: 'runs' });
    const broken = ownerOnly(env.folder, 'policy-broken.json', '{"current_revision_ref":', 0o644);
    expect(refusal(env, { CREDENTIAL_POLICY_FILE: broken }).message).toMatch(/not valid JSON/);
    const other = ownerOnly(
      env.folder,
      'policy.json',
      JSON.stringify({ current_revision_ref: 'rev-1', accepted_previous_revisions: [], revoked_revisions: ['rev-2'] }),
      0o644,
    );
    expect(refusal(env, { CREDENTIAL_POLICY_FILE: other }).message).toMatch(/does not authorise/);
    const good = ownerOnly(
      env.folder,
      'policy-good.json',
      JSON.stringify({ current_revision_ref: 'rev-2', accepted_previous_revisions: ['rev-1'], revoked_revisions: [] }),
      0o644,
    );
    expect(load(env, { CREDENTIAL_POLICY_FILE: good }).credentialPolicyFile).toBe(good);
  });
});
