import type { AipCapability, OperationName } from '../types.js';
import { isReadContract } from '../contract/schemas.js';

/** One connector capability published as one MCP tool. */
export interface HermesTool {
  readonly name: string;
  readonly capabilityId: string;
  readonly endpointId: string;
  readonly operation: OperationName;
  /** The contract requires an AIP idempotency key: the tool takes `idempotency_key` and generates one when absent. */
  readonly keyed: boolean;
  /** The contract requires an AIP approval grant: the server asks the person before the call. */
  readonly needsApproval: boolean;
  /** What `tools/list` shows. */
  readonly definition: ToolDefinition;
}

export interface ToolDefinition {
  name: string;
  title: string;
  description: string;
  inputSchema: Record<string, unknown> & { type: 'object' };
  outputSchema: Record<string, unknown> & { type: 'object' };
  annotations: { title: string; readOnlyHint: boolean; destructiveHint: boolean; idempotentHint: boolean; openWorldHint: boolean };
}

/** A configuration this server cannot publish (an endpoint id too long for a tool name, a name collision). */
export class McpSetupError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'McpSetupError';
  }
}

/** SEP-986, as the SDK's validateToolName checks it: 1-128 of A-Z a-z 0-9 _ - . */
const MCP_TOOL_NAME = /^[A-Za-z0-9._-]{1,128}$/;
export const IDEMPOTENCY_KEY_ARGUMENT = 'idempotency_key';

export function toolName(endpointId: string, operation: string): string {
  return `hermes_${endpointId}_${operation}`;
}

/** Tool names for (endpoint, operation) pairs; a name MCP does not allow, or two pairs with one name, is refused. */
export function checkedToolNames(pairs: ReadonlyArray<{ endpointId: string; operation: string }>): string[] {
  const seen = new Map<string, string>();
  return pairs.map(({ endpointId, operation }) => {
    const name = toolName(endpointId, operation);
    if (!MCP_TOOL_NAME.test(name)) {
      throw new McpSetupError(
        `endpoint "${endpointId.slice(0, 40)}" cannot be published over MCP: its tool name would be ${name.length} characters of which MCP allows 128 of [A-Za-z0-9._-]`,
      );
    }
    const other = seen.get(name);
    if (other !== undefined) throw new McpSetupError(`tool name ${name} would stand for both ${other} and ${endpointId}:${operation}`);
    seen.set(name, `${endpointId}:${operation}`);
    return name;
  });
}

/** The tools for every capability the connector publishes, in manifest order. Throws McpSetupError. */
export function buildTools(capabilities: readonly AipCapability[]): HermesTool[] {
  const bound = capabilities.map((capability) => ({ capability, binding: bindingOf(capability) }));
  const names = checkedToolNames(bound.map(({ binding }) => ({ endpointId: binding.endpoint_id, operation: binding.operation })));
  return bound.map(({ capability, binding }, index) => {
    const contract = capability.contract as unknown as ContractView;
    const keyed = contract.idempotency.requirement === 'required';
    const needsApproval = contract.approval?.required === true;
    const name = names[index] as string;
    return {
      name,
      capabilityId: capability.id,
      endpointId: binding.endpoint_id,
      operation: binding.operation,
      keyed,
      needsApproval,
      definition: {
        name,
        title: capability.name,
        description: describe(capability, keyed, needsApproval),
        inputSchema: toolInputSchema(capability, keyed),
        outputSchema: toolOutputSchema(capability),
        annotations: annotationsFrom(capability.name, contract),
      },
    };
  });
}

interface ContractView {
  side_effects: string[];
  idempotency: { requirement: string };
  execution: { retry_safety: string };
  approval?: { required: boolean; reason?: string };
}

function bindingOf(capability: AipCapability): { endpoint_id: string; operation: OperationName } {
  const binding = capability.bindings[0];
  if (!binding) throw new McpSetupError(`capability ${capability.id} has no binding`);
  return binding;
}

function describe(capability: AipCapability, keyed: boolean, needsApproval: boolean): string {
  const notes = [capability.description];
  if (needsApproval) notes.push('Before anything is sent, the MCP client asks you to approve or deny this exact input.');
  if (keyed) notes.push('Pass `idempotency_key` to make retries safe; without one, every call is a new action.');
  return notes.join(' ');
}

/**
 * The capability's input schema with `idempotency_key` beside its fields when the contract
 * requires a key. MCP clients send one flat arguments object.
 */
function toolInputSchema(capability: AipCapability, keyed: boolean): ToolDefinition['inputSchema'] {
  const schema = publishable(capability.input_schema);
  if (!keyed) return schema;
  const properties = { ...(schema['properties'] as Record<string, unknown> | undefined) };
  if (IDEMPOTENCY_KEY_ARGUMENT in properties) throw new McpSetupError(`the input of ${capability.id} already has a field ${IDEMPOTENCY_KEY_ARGUMENT}`);
  properties[IDEMPOTENCY_KEY_ARGUMENT] = {
    type: 'string',
    minLength: 1,
    maxLength: 255,
    description:
      'AIP idempotency key (visible ASCII): the same key and input within 24 h return the original result without reaching Hermes again. ' +
      'When absent, a fresh key is generated for this call only, which gives no protection against a client retrying the call.',
  };
  return { ...schema, properties };
}

/**
 * The SDK client validates `structuredContent` against the output schema on failed calls too,
 * so the schema admits the AIP output or the AIP result of a call that did not complete.
 */
function toolOutputSchema(capability: AipCapability): ToolDefinition['outputSchema'] {
  return { type: 'object', anyOf: [publishable(capability.output_schema), TOOL_OUTCOME_SCHEMA] };
}

/** structuredContent of a call that did not complete: the AIP result's status, action id, and its output and error when it has them. */
const TOOL_OUTCOME_SCHEMA = {
  type: 'object',
  required: ['status', 'action_id'],
  properties: {
    status: { enum: ['completed', 'failed', 'cancelled', 'pending_approval', 'requires_human'] },
    action_id: { type: 'string' },
    output: {},
    error: {
      type: 'object',
      required: ['code', 'message', 'category', 'retryable'],
      properties: {
        code: { type: 'string' },
        message: { type: 'string' },
        category: { type: 'string' },
        retryable: { type: 'boolean' },
        retry_after_ms: { type: 'integer' },
        details: { type: 'object', properties: { uncertain_outcome: { type: 'boolean' } } },
      },
    },
  },
  additionalProperties: false,
} as const;

/**
 * A schema as a client may compile it: without `$schema` (draft-07 validators refuse 2020-12's URI)
 * and `$id` (the same id on every endpoint's tool would clash in one validator).
 */
function publishable(schema: Record<string, unknown>): Record<string, unknown> & { type: 'object' } {
  const { $schema: _schema, $id: _id, ...rest } = structuredClone(schema);
  return { ...rest, type: 'object' };
}

/** MCP's hints, read from the contract: a call without `write` is read-only; one that needs approval changes protected state. */
function annotationsFrom(title: string, contract: ContractView): ToolDefinition['annotations'] {
  return {
    title,
    readOnlyHint: isReadContract(contract),
    destructiveHint: contract.approval?.required === true,
    idempotentHint: contract.execution.retry_safety === 'safe',
    openWorldHint: contract.side_effects.includes('external_network'),
  };
}
