/**
 * The MCP server in-process, over the SDK's linked in-memory transports, for what a subprocess
 * cannot stage: a ledger whose reads fail with a database driver's words.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { ErrorCode, McpError } from '@modelcontextprotocol/sdk/types.js';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { createHermesConnector, createMemoryLedger } from '../../src/index.js';
import { createHermesMcpServer } from '../../src/mcp/server.js';
import { buildTools } from '../../src/mcp/tools.js';

/** What pg or better-sqlite3 may put in a message: the connection string with its password, the statement. */
const DRIVER_MESSAGE =
  'connection to postgres://aip_ci:s3cret-ledger-pass@db.internal:5432/aip_ledger lost during SELECT * FROM aip_run_bindings WHERE run_id = $1';

const closing: Array<() => Promise<void>> = [];
afterEach(async () => {
  await Promise.allSettled(closing.splice(0).map((close) => close()));
});

async function serverWithFailingLedger(): Promise<{ client: Client; logLines: string[] }> {
  const ledger = createMemoryLedger();
  ledger.evidence = () => Promise.reject(Object.assign(new Error(DRIVER_MESSAGE), { code: '57P01' }));
  const connector = createHermesConnector({ endpoints: [{ id: 'local', baseUrl: 'http://127.0.0.1:9', apiKey: 'hk_mcp_server_test' }], ledger });
  const logLines: string[] = [];
  const logger = pino({ level: 'trace' }, { write: (line: string) => void logLines.push(line) });
  const server = createHermesMcpServer({
    connector,
    tools: buildTools(connector.capabilities()),
    identity: { principalId: 'user:ada', tenantId: 'tenant-a' },
    approvals: false,
    evidence: true,
    logger,
  });
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  const client = new Client({ name: 'hermes-mcp-test', version: '9.9.9' });
  await server.connect(serverSide);
  await client.connect(clientSide);
  closing.push(
    () => client.close(),
    () => connector.close(),
  );
  return { client, logLines };
}

describe('hermes://evidence during a ledger outage', () => {
  it('answers a typed, generic error: nothing of the driver message reaches the client', async () => {
    const { client, logLines } = await serverWithFailingLedger();
    const error = await client.readResource({ uri: 'hermes://evidence/run_1' }).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(McpError);
    expect(error).toMatchObject({
      code: ErrorCode.InternalError,
      data: { code: 'connector.hermes_agent.ledger_unavailable', retryable: true },
    });
    expect((error as McpError).message).toContain('The run ledger could not be reached');
    const seen = `${(error as McpError).message} ${JSON.stringify((error as McpError).data)}`;
    for (const part of ['s3cret', 'postgres://', 'SELECT', 'aip_run_bindings', '57P01']) expect(seen).not.toContain(part);
    // The operator's log names the failure without the driver's words either.
    expect(logLines.join('\n')).toMatch(/run ledger failed while reading evidence/);
    expect(logLines.join('\n')).not.toContain('s3cret');
  });
});
