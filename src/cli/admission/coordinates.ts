/**
 * The coordinates file: where the version goes in the registry (package id and revision, connector type, version,
 * the tenants' instances, the pre-provisioned replicas with their endpoints and the DIDs `hermes-aip host --print-did`
 * printed). Checked as the reference checks them before anything is signed.
 */
import { isDidKey } from '../../host/wire/keys.js';
import { PACKAGE_VERSION } from '../../internal/package-info.js';
import { UsageError } from '../errors.js';
import { isCount, isLabel, readSettingsFile, settingsField, settingsObject } from './inputs.js';

export interface Instance {
  id: string;
  tenant_id: string;
  config_revision: number;
  secret_provider_ref: string;
  credential_revision_ref: string | null;
}

export interface Replica {
  id: string;
  instance_id: string;
  endpoint: string;
  peer_did: string;
  capacity: number;
  topology: { region: string; zone: string; capacity_class: string };
}

export interface Coordinates {
  packageId: string;
  revision: number;
  connectorType: { id: string; name: string; owner: string };
  version: { id: string; version: string; status: 'admitted' | 'active'; sdkVersionRequirement: string };
  instances: Instance[];
  replicas: Replica[];
}

/** The reference registry's SDK (getaip/core 2.1.0) must satisfy the requirement a version declares. */
const DEFAULT_SDK_REQUIREMENT = '^2.1';
const MESSAGES_PATH = '/aip/v1/messages';
const TOPOLOGY_LABEL = /^[A-Za-z0-9._-]{1,128}$/;

const prefixed =
  (prefix: string) =>
  (value: unknown): value is string =>
    isLabel()(value) && value.startsWith(prefix) && value.length > prefix.length;
const isPositive = (value: unknown): value is number => isCount(value) && value > 0;
const isStatus = (value: unknown): value is 'admitted' | 'active' => value === 'admitted' || value === 'active';

export function loadCoordinates(path: string): Coordinates {
  const file = settingsObject(readSettingsFile(path, '--coordinates').value, '--coordinates');
  const where = '--coordinates';
  const type = settingsObject(file['connector_type'], `${where}.connector_type`);
  const version = settingsObject(file['version'], `${where}.version`);
  const coordinates: Coordinates = {
    packageId: settingsField(file, 'package_id', where, isLabel(), '1 to 256 bytes of printable text'),
    revision: settingsField(file, 'revision', where, isPositive, 'a positive integer'),
    connectorType: {
      id: settingsField(type, 'id', `${where}.connector_type`, prefixed('ctype_'), 'an id starting with ctype_'),
      name: settingsField(type, 'name', `${where}.connector_type`, isLabel(), '1 to 256 bytes of printable text'),
      owner: settingsField(type, 'owner', `${where}.connector_type`, isLabel(), '1 to 256 bytes of printable text'),
    },
    version: {
      id: settingsField(version, 'id', `${where}.version`, prefixed('cver_'), 'an id starting with cver_'),
      version: settingsField({ version: PACKAGE_VERSION, ...version }, 'version', `${where}.version`, isLabel(), 'a version string'),
      status: settingsField({ status: 'active', ...version }, 'status', `${where}.version`, isStatus, '"admitted" or "active"'),
      sdkVersionRequirement: settingsField(
        { sdk_version_requirement: DEFAULT_SDK_REQUIREMENT, ...version },
        'sdk_version_requirement',
        `${where}.version`,
        isLabel(),
        'a semver requirement',
      ),
    },
    instances: listOf(file, 'instances', instanceOf),
    replicas: listOf(file, 'replicas', replicaOf),
  };
  checkReferences(coordinates);
  return coordinates;
}

function listOf<T>(file: Record<string, unknown>, key: string, read: (item: unknown, where: string) => T): T[] {
  const items = file[key];
  if (!Array.isArray(items) || items.length === 0) throw new UsageError(`--coordinates.${key}: must be a non-empty array`);
  return items.map((item, index) => read(item, `--coordinates.${key}[${index}]`));
}

function instanceOf(item: unknown, where: string): Instance {
  const entry = settingsObject(item, where);
  const credential = entry['credential_revision_ref'] ?? null;
  if (credential !== null && !isLabel()(credential)) throw new UsageError(`${where}.credential_revision_ref: must be a string or null`);
  return {
    id: settingsField(entry, 'id', where, prefixed('cinst_'), 'an id starting with cinst_'),
    tenant_id: settingsField(entry, 'tenant_id', where, isLabel(), '1 to 256 bytes of printable text'),
    config_revision: settingsField({ config_revision: 1, ...entry }, 'config_revision', where, isCount, 'a non-negative integer'),
    secret_provider_ref: settingsField(entry, 'secret_provider_ref', where, isLabel(), '1 to 256 bytes of printable text'),
    credential_revision_ref: credential,
  };
}

function replicaOf(item: unknown, where: string): Replica {
  const entry = settingsObject(item, where);
  const topology = settingsObject(entry['topology'] ?? { region: 'global', zone: 'default', capacity_class: 'standard' }, `${where}.topology`);
  const label = (value: unknown): value is string => typeof value === 'string' && TOPOLOGY_LABEL.test(value);
  return {
    id: settingsField(entry, 'id', where, prefixed('crepl_'), 'an id starting with crepl_'),
    instance_id: settingsField(entry, 'instance_id', where, prefixed('cinst_'), 'an id starting with cinst_'),
    endpoint: settingsField(
      entry,
      'endpoint',
      where,
      isReplicaEndpoint,
      `an https URL ending in ${MESSAGES_PATH} (http only on loopback), without userinfo, query or fragment`,
    ),
    peer_did: settingsField(entry, 'peer_did', where, isPeerDid, 'the did:key `hermes-aip host --print-did` printed for this replica'),
    capacity: settingsField({ capacity: 32, ...entry }, 'capacity', where, isPositive, 'a positive integer (the host MAX_IN_FLIGHT)'),
    topology: {
      region: settingsField(topology, 'region', `${where}.topology`, label, 'up to 128 letters, digits, dots, dashes or underscores'),
      zone: settingsField(topology, 'zone', `${where}.topology`, label, 'up to 128 letters, digits, dots, dashes or underscores'),
      capacity_class: settingsField(topology, 'capacity_class', `${where}.topology`, label, 'up to 128 letters, digits, dots, dashes or underscores'),
    },
  };
}

const isPeerDid = (value: unknown): value is string => typeof value === 'string' && isDidKey(value);

function isReplicaEndpoint(value: unknown): value is string {
  if (typeof value !== 'string') return false;
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return false;
  }
  const loopback = ['localhost', '127.0.0.1', '[::1]'].includes(url.hostname) || url.hostname.startsWith('127.');
  const scheme = url.protocol === 'https:' || (url.protocol === 'http:' && loopback);
  return scheme && url.username === '' && url.password === '' && url.search === '' && url.hash === '' && url.pathname.endsWith(MESSAGES_PATH);
}

/** Ids are unique, and every replica serves an instance of this package (the reference refuses the package otherwise). */
function checkReferences({ instances, replicas }: Coordinates): void {
  const instanceIds = new Set(instances.map((instance) => instance.id));
  const replicaIds = new Set(replicas.map((replica) => replica.id));
  if (instanceIds.size !== instances.length) throw new UsageError('--coordinates.instances: two instances have the same id');
  if (replicaIds.size !== replicas.length) throw new UsageError('--coordinates.replicas: two replicas have the same id');
  for (const [index, replica] of replicas.entries()) {
    if (!instanceIds.has(replica.instance_id)) throw new UsageError(`--coordinates.replicas[${index}].instance_id: names no instance of this package`);
  }
}
