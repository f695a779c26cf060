import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { ElicitRequestSchema, type CallToolResult, type ElicitRequest, type ElicitResult, type JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { afterEach, expect } from 'vitest';
import type { HermesSimulator } from 'aip-connector-hermes-agent/simulator';
import { CLI } from '../cli/helpers.js';

export { CLI, SIM_KEY, simulatorWithConfig, spawnCli, tempDir, waitForOutput } from '../cli/helpers.js';

/** How the test client answers `elicitation/create`; absent: the client does not offer elicitation. */
export type Elicit = (request: ElicitRequest) => ElicitResult | Promise<ElicitResult>;

export interface ConnectedClient {
  client: Client;
  /** Every JSON-RPC message the server sent, in arrival order (the SDK client drops progress that arrives with its response). */
  received: JSONRPCMessage[];
  elicitations: ElicitRequest[];
  stderr: () => string;
}

const clients: Client[] = [];
afterEach(async () => {
  await Promise.allSettled(clients.splice(0).map((client) => client.close()));
});

/** An SDK client connected over `transport`, recording what the server sends and the forms it asks for. */
export async function connect(transport: Transport, elicit?: Elicit, name = 'hermes-mcp-test'): Promise<Omit<ConnectedClient, 'stderr'>> {
  const client = new Client({ name, version: '9.9.9' }, { capabilities: elicit ? { elicitation: { form: {} } } : {} });
  const elicitations: ElicitRequest[] = [];
  if (elicit) {
    client.setRequestHandler(ElicitRequestSchema, (request) => {
      elicitations.push(request);
      return elicit(request);
    });
  }
  clients.push(client);
  await client.connect(transport);
  const received: JSONRPCMessage[] = [];
  const deliver = transport.onmessage;
  transport.onmessage = (message, extra) => {
    received.push(message);
    deliver?.(message, extra);
  };
  return { client, received, elicitations };
}

/** `hermes-aip mcp …args` from the built CLI, over stdio, with a minimal environment. */
export async function stdioClient(args: string[], options: { elicit?: Elicit; env?: Record<string, string> } = {}): Promise<ConnectedClient> {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [CLI, 'mcp', ...args],
    env: { PATH: process.env['PATH'] ?? '', ...options.env },
    stderr: 'pipe',
  });
  let stderr = '';
  transport.stderr?.on('data', (data: Buffer) => (stderr += data.toString()));
  const connected = await connect(transport, options.elicit);
  return { ...connected, stderr: () => stderr };
}

/** Answers every approval form the same way. */
export const answer =
  (decision: 'approve' | 'deny', reason = 'checked the command'): Elicit =>
  () => ({ action: 'accept', content: { decision, reason } });

export async function call(client: Client, name: string, args: Record<string, unknown>): Promise<CallToolResult> {
  return (await client.callTool({ name, arguments: args })) as CallToolResult;
}

export interface ToolError {
  status: string;
  action_id: string;
  error: { code: string; category: string; retryable: boolean; message: string; details?: { uncertain_outcome?: boolean } };
}

/** The typed AIP error of a failed call, after checking it is one. */
export function toolError(result: CallToolResult): ToolError {
  expect(result.isError, JSON.stringify(result)).toBe(true);
  const structured = result.structuredContent as unknown as ToolError;
  const text = (result.content[0] as { text: string }).text;
  expect(text).toContain(structured.error.code);
  return structured;
}

/** A run that asks for approval before its tool step, then completes. */
export const APPROVAL_BODY = { input: 'please run rm -rf ./scratch' };

export async function startRun(client: Client, body: Record<string, unknown> = APPROVAL_BODY, key?: string): Promise<string> {
  const result = await call(client, 'hermes_local_run_start', key === undefined ? { body } : { body, idempotency_key: key });
  expect(result.isError, JSON.stringify(result)).toBeFalsy();
  return (result.structuredContent as { run_id: string }).run_id;
}

export function approvalRequests(sim: HermesSimulator): number {
  return sim.requests.filter((request) => request.method === 'POST' && request.path.endsWith('/approval')).length;
}

export function progressMessages(received: JSONRPCMessage[]): Array<{ progress: number; message?: string }> {
  return received.flatMap((message) =>
    'method' in message && message.method === 'notifications/progress' ? [message.params as { progress: number; message?: string }] : [],
  );
}

/** A config file for endpoint `local` at `baseUrl` (its key in hermes.key beside it), with extra top-level fields ("mcp", "ledger"). */
export function writeConfig(folder: string, baseUrl: string, extra: Record<string, unknown> = {}): string {
  const path = join(folder, 'mcp-config.json');
  writeFileSync(path, JSON.stringify({ endpoints: [{ id: 'local', baseUrl, apiKeyFile: 'hermes.key' }], ...extra }));
  return path;
}
