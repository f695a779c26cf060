/**
 * What a typed serde parse and re-serialisation through the reference's Rust types does to a JSON value
 * (getaip/core: aip-core `envelope.rs`, `model.rs`, `messages.rs`; aip-runtime `ApprovalRecord`; aip-auth
 * `AuthorityMembership`; aip-connector-registry `ConnectorReplica`; aip-connector-host control messages).
 * Unknown fields are dropped, `None` and skip-if-empty fields omitted, defaults filled in, RFC 3339 timestamps
 * normalised, `BTreeSet`s sorted, fields written in declaration order; what serde refuses is a failure.
 * Free-form `Value` fields are passed through as they are (number lexemes included).
 */
import { type Json, NumberLexeme, setOwn, WithPlainCopy } from './json.js';
import { normaliseRfc3339, normaliseTimeArray, timeArrayToRfc3339 } from './time.js';

export type Kind =
  | { k: 'string' }
  | { k: 'bool' }
  | { k: 'any' }
  | { k: 'int'; signed: boolean; max: bigint }
  | { k: 'rfc3339' }
  | { k: 'timeArray' }
  | { k: 'persistedTime' }
  | { k: 'enum'; values: readonly string[] }
  | { k: 'vec'; of: Kind }
  | { k: 'set' }
  | { k: 'map'; key: Kind; of: Kind }
  | { k: 'struct'; fields: readonly Field[]; flatten?: true }
  | { k: 'tagged'; tag: string; variants: Readonly<Record<string, readonly Field[]>> }
  | { k: 'adjacent'; tag: string; content: string; variants: Readonly<Record<string, Kind>> }
  | { k: 'external'; variants: Readonly<Record<string, Kind>> }
  | { k: 'lazy'; get: () => Kind };

/**
 * required: no serde default; option: `Option<T>` skipped when `None`; nullable: `Option<T>` always written (null);
 * skipEmpty: `Vec` with `default` and `skip_serializing_if = "Vec::is_empty"`; { default }: `#[serde(default)]`, always written.
 */
export type Presence = 'required' | 'option' | 'nullable' | 'skipEmpty' | { default: unknown };

export interface Field {
  name: string;
  kind: Kind;
  presence: Presence;
}

export const field = (name: string, kind: Kind, presence: Presence = 'required'): Field => ({ name, kind, presence });
export const opt = (name: string, kind: Kind): Field => field(name, kind, 'option');
const list = (name: string, of: Kind): Field => field(name, { k: 'vec', of }, 'skipEmpty');
export const struct = (...fields: Field[]): Kind => ({ k: 'struct', fields });
export const enumOf = (...values: string[]): Kind => ({ k: 'enum', values });

export const STRING: Kind = { k: 'string' };
export const BOOL: Kind = { k: 'bool' };
export const ANY: Kind = { k: 'any' };
export const U64: Kind = { k: 'int', signed: false, max: (1n << 64n) - 1n };
export const U32: Kind = { k: 'int', signed: false, max: (1n << 32n) - 1n };
const U8: Kind = { k: 'int', signed: false, max: 255n };
const RFC3339: Kind = { k: 'rfc3339' };
export const TIME_ARRAY: Kind = { k: 'timeArray' };
export const SET: Kind = { k: 'set' };

const PRINCIPAL_KIND = enumOf('human', 'agent', 'service', 'tenant', 'customer', 'contact', 'system');
const RISK_LEVEL = enumOf('low', 'medium', 'high', 'critical');
const EXTERNAL_REF = struct(field('system', STRING), field('type', STRING), field('id', STRING));

export const PRINCIPAL = struct(
  field('id', STRING),
  field('kind', PRINCIPAL_KIND),
  opt('display_name', STRING),
  opt('trust_domain', STRING),
  opt('did', STRING),
  list('external_refs', EXTERNAL_REF),
  list('delegated_authority', struct(field('principal_id', STRING), list('scopes', STRING), opt('expires_at', RFC3339), opt('reason', STRING))),
  opt('auth_context', ANY),
);

const EVIDENCE_ARTIFACT = struct(field('id', STRING), field('kind', STRING), opt('uri', STRING), opt('hash', STRING), field('redacted', BOOL));

export const PROTOCOL_ERROR = struct(
  field('code', STRING),
  field('message', STRING),
  field('category', enumOf('temporary', 'permanent', 'auth', 'policy', 'economic', 'connector', 'transport')),
  opt('retryable', BOOL),
  opt('retry_after_ms', U64),
  opt('details', ANY),
  opt('source', ANY),
);

const APPROVER_SELECTOR: Kind = {
  k: 'tagged',
  tag: 'type',
  variants: {
    principal: [field('id', STRING)],
    role: [field('name', STRING)],
    group: [field('name', STRING)],
    tenant_policy: [],
    external_system: [field('system', STRING)],
  },
};

const APPROVAL_RULE: Kind = {
  k: 'tagged',
  tag: 'operator',
  variants: {
    all: [field('rules', { k: 'vec', of: { k: 'lazy', get: () => APPROVAL_RULE } }), field('allow_decision_reuse', BOOL, { default: false })],
    any: [field('rules', { k: 'vec', of: { k: 'lazy', get: () => APPROVAL_RULE } })],
    quorum: [
      field('required', U32),
      field('rules', { k: 'vec', of: { k: 'lazy', get: () => APPROVAL_RULE } }),
      field('distinct_principals', BOOL, { default: true }),
    ],
    principal: [field('id', STRING)],
    role: [field('name', STRING)],
    group: [field('name', STRING)],
    tenant_policy: [field('policy_id', STRING)],
    external_system: [field('system', STRING)],
    delegated_authority: [field('scope', STRING), opt('max_risk', RISK_LEVEL), opt('max_value', U64)],
  },
};

const APPROVAL_POLICY = struct(
  field('required', BOOL),
  opt('reason', STRING),
  field('approver_selector', APPROVER_SELECTOR),
  opt('ttl_ms', U64),
  list('evidence_requirements', enumOf('reason', 'input_snapshot', 'policy_decision', 'external_ticket', 'attachment')),
  opt('delegated_authority', struct(field('principal', STRING), list('scope', STRING), opt('expires_at', RFC3339))),
  opt('rule', APPROVAL_RULE),
  field('minimum_distinct_principals', U32, { default: 1 }),
  field(
    'separation_of_duties',
    struct(
      field('requester_must_differ', BOOL, { default: false }),
      field('operator_must_differ', BOOL, { default: false }),
      field('allow_self_approval', BOOL, { default: false }),
    ),
    { default: {} },
  ),
  opt('policy_version', STRING),
);

const TENANT_REF = struct(field('id', STRING), opt('system', STRING));
const ACCOUNT_REF = struct(field('id', STRING), field('system', STRING));

const IDENTITY_CONTEXT = struct(
  opt('tenant', TENANT_REF),
  opt('external_account', ACCOUNT_REF),
  opt('external_user', ACCOUNT_REF),
  opt('human_actor', PRINCIPAL),
  opt('service_account', PRINCIPAL),
  opt('acted_on_behalf_of', PRINCIPAL),
  opt('credential_ref', struct(field('id', STRING), field('issuer', STRING), list('scopes', STRING))),
  opt('oauth', struct(field('issuer', STRING), opt('client_id', STRING), list('scopes', STRING), opt('expires_at', RFC3339), field('refresh_available', BOOL))),
);

export const APPROVAL_DECISION = struct(
  field('approval_id', STRING),
  field('decision', enumOf('approved', 'denied', 'expired', 'revoked')),
  field('approver', PRINCIPAL),
  field('decided_at', RFC3339),
  opt('reason', STRING),
  list('constraints', struct(field('field', STRING), field('operator', STRING), field('value', ANY))),
  list('evidence', EVIDENCE_ARTIFACT),
  opt('decision_id', STRING),
  opt('policy_hash', STRING),
  list('authority_path', STRING),
  opt('target_decision_id', STRING),
);

const MESSAGE_PART: Kind = {
  k: 'tagged',
  tag: 'type',
  variants: {
    text: [field('text', STRING), opt('format', STRING)],
    image: [opt('url', STRING), opt('data', STRING), field('mime_type', STRING), opt('alt', STRING)],
    file: [opt('url', STRING), opt('data', STRING), field('mime_type', STRING), field('filename', STRING), opt('size_bytes', U64)],
    audio: [opt('url', STRING), opt('data', STRING), field('mime_type', STRING), opt('transcript', STRING)],
    form: [field('fields', { k: 'vec', of: ANY }), field('actions', { k: 'vec', of: ANY })],
    card: [field('title', STRING), field('body', STRING), list('actions', ANY), opt('media', ANY)],
    json: [field('data', ANY), opt('schema', ANY)],
    tool_result: [field('tool_call_id', STRING), opt('data', ANY), opt('error', ANY)],
  },
};

const CONVERSATION = struct(
  field('id', STRING),
  field('channel', ANY),
  field('status', enumOf('open', 'pending', 'resolved', 'snoozed', 'archived')),
  list('external_refs', EXTERNAL_REF),
  opt('contact', PRINCIPAL),
  opt('assignee', PRINCIPAL),
  opt('priority', enumOf('low', 'medium', 'high', 'urgent')),
  list('labels', STRING),
  opt('metadata', ANY),
);

const TRANSACTION_MODE = enumOf('execute', 'dry_run', 'plan', 'commit', 'compensate', 'reconcile', 'rollback_not_supported');

export const ACTION = struct(
  field('id', STRING),
  field('capability_id', STRING),
  field('input', ANY),
  opt('mode', enumOf('sync', 'async', 'streaming')),
  opt('idempotency_key', STRING),
  opt('timeout_ms', U64),
  opt('conversation', CONVERSATION),
  opt('memory_context', ANY),
  list('delegation_chain', struct(field('from', PRINCIPAL), field('to', PRINCIPAL), field('scope', STRING), field('delegated_at', RFC3339))),
  opt('federation', struct(field('trust_domain', STRING), list('hops', STRING))),
  opt('callback', struct(field('profile', STRING), field('target', STRING), opt('metadata', ANY))),
  opt('observability', struct(opt('trace_id', STRING), opt('span_id', STRING), opt('fields', ANY))),
  opt('compliance', struct(list('regimes', STRING), opt('data_classification', STRING), opt('metadata', ANY))),
  opt('identity', IDENTITY_CONTEXT),
  opt('approval', APPROVAL_DECISION),
  opt('transaction', struct(field('mode', TRANSACTION_MODE), opt('transaction_id', STRING), opt('plan_id', STRING), opt('compensation_for', STRING))),
);

export const ACTION_RESULT = struct(
  field('action_id', STRING),
  field('status', enumOf('completed', 'failed', 'cancelled', 'pending_approval', 'requires_human')),
  opt('output', ANY),
  list('message', MESSAGE_PART),
  opt('memory_update', ANY),
  opt('usage', struct(opt('tokens', ANY), opt('tools', ANY), opt('latency_ms', U64), opt('cost', ANY))),
  opt('receipt', struct(field('id', STRING), field('hash', STRING))),
  opt('error', PROTOCOL_ERROR),
);

export const STREAM_CHUNK = struct(
  field('action_id', STRING),
  field('sequence', U64),
  field('kind', enumOf('data', 'progress', 'tool', 'thought', 'preview', 'pending_approval', 'error', 'done')),
  opt('data', ANY),
  opt('part', MESSAGE_PART),
);

const EVENT = struct(
  field('id', STRING),
  field('kind', STRING),
  field('occurred_at', RFC3339),
  opt('session_id', STRING),
  opt('action_id', STRING),
  opt('correlation_id', STRING),
  opt('actor', PRINCIPAL),
  opt('data', ANY),
);

const CAPABILITY_CONTRACT = struct(
  list('side_effects', enumOf('read', 'write', 'delete', 'send_message', 'financial', 'identity', 'medical', 'legal', 'external_network', 'code_execution')),
  field(
    'idempotency',
    struct(
      field('requirement', enumOf('required', 'optional', 'unsupported')),
      field('collision_behavior', enumOf('return_original_result', 'reject_conflict', 'revalidate_input_hash')),
      field('key_scope', enumOf('action', 'capability', 'principal', 'tenant', 'external_account')),
      opt('ttl_ms', U64),
    ),
  ),
  field(
    'execution',
    struct(
      field('supports_sync', BOOL),
      field('supports_async', BOOL),
      field('supports_streaming', BOOL),
      field('supports_cancel', BOOL),
      field('supports_retry', BOOL),
      field('expected_completion', enumOf('sync', 'async', 'streaming', 'any')),
      field('retry_safety', enumOf('safe', 'safe_with_idempotency_key', 'unsafe', 'unknown')),
    ),
  ),
  field(
    'data',
    struct(
      field('sensitivity', enumOf('public', 'internal', 'confidential', 'restricted', 'regulated', 'unknown')),
      field('contains_pii', BOOL),
      field('redaction_required', BOOL),
      opt('residency', struct(list('allowed_regions', STRING), list('prohibited_regions', STRING))),
      opt('retention', struct(opt('retain_for_ms', U64), opt('delete_after_ms', U64), field('legal_hold_allowed', BOOL))),
    ),
  ),
  opt('credentials', struct(field('required', BOOL), list('accepted_issuers', STRING), list('required_scopes', STRING), field('allow_oauth_refresh', BOOL))),
  opt('approval', APPROVAL_POLICY),
  opt(
    'sla',
    struct(
      opt('expected_latency_ms', U64),
      opt('timeout_ms', U64),
      field('async_expected', BOOL),
      opt('max_queue_delay_ms', U64),
      opt('availability_target', STRING),
    ),
  ),
  opt(
    'transaction',
    struct(
      list('supported_modes', TRANSACTION_MODE),
      field('requires_plan_before_commit', BOOL),
      field('dry_run_fidelity', enumOf('schema_only', 'policy_and_schema', 'downstream_validation', 'full_simulation')),
    ),
  ),
  opt(
    'compensation',
    struct(
      field('mode', enumOf('not_required', 'supported', 'best_effort', 'rollback_not_supported')),
      opt('compensation_capability_id', STRING),
      opt('compensation_window_ms', U64),
      field('requires_approval', BOOL),
    ),
  ),
);

const CAPABILITY = struct(
  field('id', STRING),
  field('name', STRING),
  field('kind', enumOf('agent', 'tool', 'workflow', 'channel', 'resource', 'human_task')),
  field('input_schema', ANY),
  opt('output_schema', ANY),
  opt('description', STRING),
  opt('risk', RISK_LEVEL),
  opt('stability', enumOf('stable', 'experimental', 'deprecated')),
  opt('cost', ANY),
  opt('auth', ANY),
  list('bindings', { k: 'struct', fields: [field('profile', STRING)], flatten: true }),
  opt('requires_human_approval', BOOL),
  opt('contract', CAPABILITY_CONTRACT),
);

const RESOURCE = struct(
  field('id', STRING),
  field('name', STRING),
  opt('kind', STRING),
  opt('capability_id', STRING),
  opt('description', STRING),
  opt('mime_type', STRING),
  opt('tenant_id', STRING),
  opt(
    'access',
    struct(
      field('public', BOOL, { default: false }),
      list('allowed_principals', STRING),
      list('required_scopes', STRING),
      field('tenant_required', BOOL, { default: false }),
    ),
  ),
  opt('expires_at', RFC3339),
);

export const MANIFEST = struct(
  field('manifest_version', STRING),
  field('agent', PRINCIPAL),
  list('capabilities', CAPABILITY),
  field('profiles', { k: 'vec', of: STRING }),
  list('resources', RESOURCE),
  list('channels', ANY),
  opt('security', ANY),
  opt('governance', ANY),
  opt('limits', ANY),
  opt('compatibility', ANY),
  opt('extensions', ANY),
);

const AUTHORITY_MEMBERSHIP = struct(
  field('principal_id', STRING),
  field('tenant_id', STRING, 'nullable'),
  field('roles', SET),
  field('groups', SET),
  field('tenant_policies', SET),
  field('external_systems', SET),
  field('delegated_scopes', {
    k: 'vec',
    of: struct(
      field('scope', STRING),
      field('expires_at', { k: 'persistedTime' }),
      field('max_risk_rank', U8, 'nullable'),
      field('max_value', U64, 'nullable'),
      field('revoked', BOOL),
    ),
  }),
  field('revision', U64),
  opt('expires_at', { k: 'persistedTime' }),
  field('revoked', BOOL),
);

export const APPROVAL_RECORD = struct(
  field(
    'request',
    struct(
      field('id', STRING),
      field('action_id', STRING),
      field('capability_id', STRING),
      field('requester', PRINCIPAL),
      field('subject', PRINCIPAL),
      field('approver_selector', APPROVER_SELECTOR),
      field('reason', STRING),
      list('evidence', EVIDENCE_ARTIFACT),
      opt('expires_at', RFC3339),
      opt('policy_decision_id', STRING),
      opt('identity', IDENTITY_CONTEXT),
      opt('policy_snapshot', APPROVAL_POLICY),
      opt('policy_hash', STRING),
      opt('operator', PRINCIPAL),
      opt('risk', RISK_LEVEL),
      opt('governed_value', U64),
    ),
  ),
  field('status', enumOf('pending', 'approved', 'denied', 'expired', 'revoked')),
  opt('decision', APPROVAL_DECISION),
  list(
    'decisions',
    struct(field('decision', APPROVAL_DECISION), field('authority', AUTHORITY_MEMBERSHIP), field('evidence_hash', STRING), field('recorded_at', TIME_ARRAY)),
  ),
  field('created_at', TIME_ARRAY),
  field('updated_at', TIME_ARRAY),
);

/** The `MessageType` registry (`envelope.rs`): every serde rename. */
export const MESSAGE_TYPES = [
  'aip.core.v1.handshake',
  'aip.core.v1.handshake_response',
  'aip.core.v1.action',
  'aip.core.v1.ack',
  'aip.core.v1.stream_chunk',
  'aip.core.v1.action_result',
  'aip.lifecycle.v1.action_status_request',
  'aip.lifecycle.v1.action_status',
  'aip.lifecycle.v1.action_result_request',
  'aip.lifecycle.v1.action_list_request',
  'aip.lifecycle.v1.action_list',
  'aip.lifecycle.v1.action_events_request',
  'aip.lifecycle.v1.action_events',
  'aip.policy.v1.approval_request',
  'aip.policy.v1.approval_decision',
  'aip.policy.v1.approval_query_request',
  'aip.policy.v1.approval_list_request',
  'aip.policy.v1.approval_record_view',
  'aip.policy.v1.approval_list',
  'aip.callback.v1.delivery_query_request',
  'aip.callback.v1.delivery_list_request',
  'aip.callback.v1.delivery_record',
  'aip.callback.v1.delivery_list',
  'aip.session.v1.session_request',
  'aip.session.v1.session_view',
  'aip.session.v1.session_list_request',
  'aip.session.v1.session_list',
  'aip.session.v1.session_close_request',
  'aip.session.v1.session_resume_request',
  'aip.session.v1.session_resume',
  'aip.agent.v1.delegation_request',
  'aip.agent.v1.delegation_result',
  'aip.transaction.v1.request',
  'aip.transaction.v1.result',
  'aip.transaction.v1.query_request',
  'aip.transaction.v1.view',
  'aip.core.v1.error',
  'aip.core.v1.cancel',
  'aip.core.v1.heartbeat',
  'aip.core.v1.heartbeat_ack',
  'aip.core.v1.escalation',
  'aip.core.v1.escalation_resolution',
  'aip.discovery.v1.manifest_request',
  'aip.discovery.v1.manifest_response',
  'aip.discovery.v1.event_stream_request',
  'aip.discovery.v1.event_stream_response',
  'aip.channel.v1.message_created',
  'aip.channel.v1.conversation_updated',
  'aip.audit.v1.receipt_chain',
  'aip.audit.v1.receipt_query_request',
  'aip.audit.v1.audit_event',
  'aip.audit.v1.audit_query_request',
  'aip.audit.v1.audit_query_result',
  'aip.resource.v1.resource_list_request',
  'aip.resource.v1.resource_list',
  'aip.resource.v1.resource_read_request',
  'aip.resource.v1.resource_read_result',
  'aip.economic.v1.batch_settlement',
] as const;

/** `MessageBody` variants this hop carries, typed; the registry's other variants are passed through as free-form JSON. */
const MODELLED_BODIES: Record<string, Kind> = {
  action: ACTION,
  ack: struct(
    field('action_id', STRING),
    field('status', enumOf('accepted', 'rejected', 'queued', 'streaming', 'cached')),
    opt('reason', STRING),
    opt('retry_after_ms', U64),
    opt('queue', ANY),
  ),
  stream_chunk: STREAM_CHUNK,
  action_result: ACTION_RESULT,
  error: struct(field('error', PROTOCOL_ERROR)),
  cancel: struct(field('target', { k: 'external', variants: { action: STRING, session: STRING } }), opt('reason', STRING)),
  manifest: MANIFEST,
  event_stream: struct(field('events', { k: 'vec', of: EVENT }), opt('next_cursor', STRING)),
};

const OTHER_BODIES = [
  'handshake',
  'handshake_response',
  'action_status_request',
  'action_status',
  'action_result_request',
  'action_list_request',
  'action_list',
  'action_events_request',
  'action_events',
  'approval_request',
  'approval_decision',
  'approval_query_request',
  'approval_list_request',
  'approval_record_view',
  'approval_list',
  'callback_delivery_query_request',
  'callback_delivery_list_request',
  'callback_delivery_record',
  'callback_delivery_list',
  'session_request',
  'session_view',
  'session_list_request',
  'session_list',
  'session_close_request',
  'session_resume_request',
  'session_resume',
  'delegation_request',
  'delegation_result',
  'transaction_request',
  'transaction_result',
  'transaction_query_request',
  'transaction_view',
  'heartbeat',
  'heartbeat_ack',
  'escalation',
  'escalation_resolution',
  'manifest_request',
  'event_stream_request',
  'channel_message',
  'conversation',
  'receipt_chain',
  'receipt_query_request',
  'audit_event',
  'audit_query_request',
  'audit_query_result',
  'resource_list_request',
  'resource_list',
  'resource_read_request',
  'resource_read_result',
  'batch_settlement',
];

export const MESSAGE_BODY: Kind = {
  k: 'external',
  variants: { ...MODELLED_BODIES, ...Object.fromEntries(OTHER_BODIES.map((name) => [name, ANY])) },
};

export const ENVELOPE = struct(
  field('aip_version', STRING),
  field('message_type', enumOf(...MESSAGE_TYPES)),
  field('message_id', STRING),
  field('sent_at', RFC3339),
  field('body', MESSAGE_BODY),
  opt('session_id', STRING),
  opt('correlation_id', STRING),
  opt('in_response_to', STRING),
  opt('idempotency_key', STRING),
  opt('from', PRINCIPAL),
  opt('to', PRINCIPAL),
  opt('trace', ANY),
  opt('security', ANY),
  opt('extensions', ANY),
);

const TOPOLOGY_DEFAULT = { region: 'global', zone: 'default', capacity_class: 'standard' };

export const CONNECTOR_REPLICA = struct(
  field('id', STRING),
  field('instance_id', STRING),
  field('version_id', STRING),
  field('endpoint', STRING),
  field('peer_principal_id', STRING),
  field('peer_principal_kind', PRINCIPAL_KIND),
  field('peer_did', STRING),
  field('trust_domain', STRING),
  field('transport_profile', STRING),
  field('topology', struct(field('region', STRING), field('zone', STRING), field('capacity_class', STRING)), { default: TOPOLOGY_DEFAULT }),
  field('status', enumOf('ready', 'draining', 'offline')),
  field('lease_expires_at', TIME_ARRAY),
  field('capacity', U32),
  field('active_assignments', U32),
  field('health_revision', U64),
  opt('last_control_request_id', STRING),
  opt('last_control_request_digest', STRING),
);

const TRANSITION = struct(field('replica_id', STRING), field('previous_sequence', U64));

export const CONTROL_REQUEST = struct(
  field('request_id', STRING),
  field('issued_at', RFC3339),
  field('expires_at', RFC3339),
  field('signer_did', STRING),
  field('command', {
    k: 'adjacent',
    tag: 'operation',
    content: 'payload',
    variants: {
      register: struct(
        field('replica', CONNECTOR_REPLICA),
        field('manifest_digest', STRING),
        field('artifact_digest', STRING),
        field('tenant_id', STRING),
        field('config_revision', U64),
        field('secret_provider_ref', STRING),
        field('capability_count', U32),
      ),
      heartbeat: struct(field('replica_id', STRING), field('previous_sequence', U64), field('in_flight', U32), field('connector_ready', BOOL)),
      drain: TRANSITION,
      offline: TRANSITION,
    },
  }),
);

export const CONTROL_RESPONSE = struct(
  field('request_id', STRING),
  field('issued_at', RFC3339),
  field('expires_at', RFC3339),
  field('signer_did', STRING),
  field('outcome', {
    k: 'tagged',
    tag: 'status',
    variants: {
      lease: [field('lease', struct(field('sequence', U64), field('expires_at', TIME_ARRAY)))],
      offline: [],
      rejected: [field('code', STRING), field('message', STRING), field('retryable', BOOL)],
    },
  }),
);

export const SIGNED_CONTROL_REQUEST = struct(field('request', CONTROL_REQUEST), field('signature', STRING));
export const SIGNED_CONTROL_RESPONSE = struct(field('response', CONTROL_RESPONSE), field('signature', STRING));

class Refused extends Error {}

const isRecord = (value: unknown): value is Record<string, unknown> =>
  value !== null && typeof value === 'object' && !Array.isArray(value) && !(value instanceof NumberLexeme);

function at(path: string, key: string | number): string {
  return typeof key === 'number' ? `${path}[${key}]` : path === '' ? key : `${path}.${key}`;
}

function integerOf(value: unknown, kind: { signed: boolean; max: bigint }, path: string): unknown {
  const text = value instanceof NumberLexeme ? value.lexeme : typeof value === 'number' && Number.isInteger(value) ? String(value) : undefined;
  if (text === undefined || !/^-?\d+$/.test(text) || text === '-0') throw new Refused(`${path}: invalid type, expected an integer`);
  const n = BigInt(text);
  const min = kind.signed ? -kind.max - 1n : 0n;
  if (n < min || n > kind.max) throw new Refused(`${path}: integer ${text} out of range`);
  return value;
}

function decodeStruct(fields: readonly Field[], value: unknown, path: string, flatten = false): Record<string, unknown> {
  if (!isRecord(value)) throw new Refused(`${path || 'value'}: invalid type, expected an object`);
  const out: Record<string, unknown> = {};
  for (const spec of fields) {
    const item = Object.hasOwn(value, spec.name) ? value[spec.name] : undefined;
    // An absent skippable field is left out; its path (a string per field) is built only for the fields decoded.
    if (item === undefined && (spec.presence === 'option' || spec.presence === 'skipEmpty')) continue;
    const decoded = decodeField(spec, item, at(path, spec.name));
    if (decoded !== undefined) out[spec.name] = decoded;
  }
  if (flatten) {
    const known = fieldNames(fields);
    for (const [key, item] of Object.entries(value)) if (!known.has(key)) Object.defineProperty(out, key, { value: item, enumerable: true, writable: true });
  }
  return out;
}

const namesOfFields = new WeakMap<readonly Field[], ReadonlySet<string>>();

/** The names of a struct's fields, built once per struct kind (they are checked for every message). */
export function fieldNames(fields: readonly Field[]): ReadonlySet<string> {
  let names = namesOfFields.get(fields);
  if (names === undefined) {
    names = new Set(fields.map((spec) => spec.name));
    namesOfFields.set(fields, names);
  }
  return names;
}

function decodeField(spec: Field, item: unknown, path: string): unknown {
  const { presence } = spec;
  if (item === undefined || (item === null && (presence === 'option' || presence === 'nullable'))) {
    if (presence === 'required') throw new Refused(`${path}: missing field`);
    if (presence === 'nullable') return null;
    if (typeof presence === 'object') return decode(spec.kind, presence.default, path);
    return undefined;
  }
  const decoded = decode(spec.kind, item, path);
  return presence === 'skipEmpty' && Array.isArray(decoded) && decoded.length === 0 ? undefined : decoded;
}

/** A `BTreeMap`: keys decoded as `kind.key` and written in byte order (canonical JSON sorts them the same way). */
function decodeMap(kind: { key: Kind; of: Kind }, value: unknown, path: string): Record<string, unknown> {
  if (!isRecord(value)) throw new Refused(`${path || 'value'}: invalid type, expected a map`);
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(value).sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)))) {
    decode(kind.key, key, at(path, key));
    setOwn(out, key, decode(kind.of, value[key], at(path, key)));
  }
  return out;
}

function decodeEnumObject(value: unknown, path: string): [string, unknown] {
  if (!isRecord(value)) throw new Refused(`${path}: invalid type, expected an object with one key`);
  const entries = Object.entries(value);
  if (entries.length !== 1) throw new Refused(`${path}: expected an object with exactly one key`);
  return entries[0] as [string, unknown];
}

function decode(kind: Kind, value: unknown, path: string): unknown {
  switch (kind.k) {
    case 'string':
    case 'bool': {
      if (typeof value !== (kind.k === 'string' ? 'string' : 'boolean')) throw new Refused(`${path}: invalid type, expected a ${kind.k}`);
      return value;
    }
    case 'any':
      return value;
    case 'int':
      return integerOf(value, kind, path);
    case 'rfc3339': {
      const normalised = typeof value === 'string' ? normaliseRfc3339(value) : undefined;
      if (normalised === undefined) throw new Refused(`${path}: not an RFC 3339 timestamp`);
      return normalised;
    }
    case 'timeArray': {
      const normalised = normaliseTimeArray(Array.isArray(value) ? value.map(lexemeNumber) : value);
      if (normalised === undefined) throw new Refused(`${path}: not a 9-integer time array`);
      return normalised;
    }
    case 'persistedTime': {
      const normalised = typeof value === 'string' ? normaliseRfc3339(value) : Array.isArray(value) ? timeArrayToRfc3339(value.map(lexemeNumber)) : undefined;
      if (normalised === undefined) throw new Refused(`${path}: not a timestamp`);
      return normalised;
    }
    case 'enum':
      if (typeof value !== 'string' || !kind.values.includes(value)) throw new Refused(`${path}: unknown variant ${JSON.stringify(value)}`);
      return value;
    case 'vec':
      if (!Array.isArray(value)) throw new Refused(`${path}: invalid type, expected an array`);
      return value.map((item, i) => decode(kind.of, item, at(path, i)));
    case 'set': {
      if (!Array.isArray(value) || !value.every((item) => typeof item === 'string')) throw new Refused(`${path}: expected an array of strings`);
      return [...new Set(value as string[])].sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
    }
    case 'map':
      return decodeMap(kind, value, path);
    case 'struct':
      return decodeStruct(kind.fields, value, path, kind.flatten);
    case 'tagged': {
      const tag = isRecord(value) ? value[kind.tag] : undefined;
      const fields = typeof tag === 'string' && Object.hasOwn(kind.variants, tag) ? kind.variants[tag] : undefined;
      if (fields === undefined) throw new Refused(`${at(path, kind.tag)}: unknown or missing variant tag`);
      return { [kind.tag]: tag, ...decodeStruct(fields, value, path) };
    }
    case 'adjacent': {
      const tag = isRecord(value) ? value[kind.tag] : undefined;
      const variant = typeof tag === 'string' && Object.hasOwn(kind.variants, tag) ? kind.variants[tag] : undefined;
      if (variant === undefined) throw new Refused(`${at(path, kind.tag)}: unknown or missing variant tag`);
      return { [kind.tag]: tag, [kind.content]: decode(variant, (value as Record<string, unknown>)[kind.content], at(path, kind.content)) };
    }
    case 'external': {
      const [name, inner] = decodeEnumObject(value, path);
      if (!Object.hasOwn(kind.variants, name)) throw new Refused(`${path}: unknown variant ${JSON.stringify(name)}`);
      return { [name]: decode(kind.variants[name] as Kind, inner, at(path, name)) };
    }
    case 'lazy':
      return decode(kind.get(), value, path);
  }
}

/** A number of a parsed tree as a JS number when it is an integer lexeme serde reads as one; anything else is left to fail. */
function lexemeNumber(item: unknown): unknown {
  return item instanceof NumberLexeme && /^-?\d+$/.test(item.lexeme) && item.lexeme !== '-0' ? Number(item.lexeme) : item;
}

/** `tree` keeps number lexemes (serialise it with wireJson/canonicalJson); `value` is the same as plain JSON, built on first use. */
export type Reserialized = { ok: true; tree: unknown; readonly value: Json } | { ok: false; reason: string };

class Decoded extends WithPlainCopy {
  readonly ok = true;
}

/** Decodes `input` (a plain value or a parseWire tree) as the reference type `kind` and re-serialises it. */
export function reserializeAs(kind: Kind, input: unknown): Reserialized {
  try {
    // A plain copy of a large free-form value costs as much as its parse: the host's checks before the signature read only the tree.
    return new Decoded(decode(kind, input, ''));
  } catch (error) {
    if (error instanceof Refused) return { ok: false, reason: error.message };
    if (error instanceof RangeError) return { ok: false, reason: 'value nested too deeply' };
    throw error;
  }
}

export const reserialize = {
  envelope: (input: unknown) => reserializeAs(ENVELOPE, input),
  principal: (input: unknown) => reserializeAs(PRINCIPAL, input),
  action: (input: unknown) => reserializeAs(ACTION, input),
  actionResult: (input: unknown) => reserializeAs(ACTION_RESULT, input),
  protocolError: (input: unknown) => reserializeAs(PROTOCOL_ERROR, input),
  streamChunk: (input: unknown) => reserializeAs(STREAM_CHUNK, input),
  manifest: (input: unknown) => reserializeAs(MANIFEST, input),
  approvalDecision: (input: unknown) => reserializeAs(APPROVAL_DECISION, input),
  approvalRecord: (input: unknown) => reserializeAs(APPROVAL_RECORD, input),
  controlRequest: (input: unknown) => reserializeAs(CONTROL_REQUEST, input),
  controlResponse: (input: unknown) => reserializeAs(CONTROL_RESPONSE, input),
  signedControlRequest: (input: unknown) => reserializeAs(SIGNED_CONTROL_REQUEST, input),
  signedControlResponse: (input: unknown) => reserializeAs(SIGNED_CONTROL_RESPONSE, input),
};
