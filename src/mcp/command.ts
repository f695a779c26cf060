import { parseArgs } from 'node:util';
import type { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { pino, type Logger } from 'pino';
import { API_KEY_SOURCES, HELP_OPTION, integerOption, parseCommand } from '../cli/args.js';
import { loadConfig, openConnector } from '../cli/config.js';
import { CliError, EXIT, UsageError } from '../cli/errors.js';
import { MCP_HELP } from '../cli/help.js';
import { onInterrupt } from '../cli/signals.js';
import type { HermesConnector } from '../types.js';
import { serveStreamableHttp } from './http.js';
import { createHermesMcpServer, type McpIdentity } from './server.js';
import { loadTokens, mcpSettings, type BearerToken } from './settings.js';
import { buildTools, McpSetupError, type HermesTool } from './tools.js';

const DEFAULT_HTTP_PORT = 8643;

/** `hermes-aip mcp`: the connector's capabilities as MCP tools, over stdio (default) or Streamable HTTP. */
export async function mcpCommand(args: string[]): Promise<number> {
  const { values } = parseCommand(
    'mcp',
    args,
    (argv) =>
      parseArgs({
        args: argv,
        strict: true,
        options: { config: { type: 'string' }, http: { type: 'boolean' }, port: { type: 'string' }, 'no-approvals': { type: 'boolean' }, help: HELP_OPTION },
      }),
    `${API_KEY_SOURCES}; MCP bearer tokens from "mcp.tokens" (tokenFile or tokenEnv) in --config, or HERMES_MCP_TOKEN`,
  );
  if (values.help) {
    process.stdout.write(MCP_HELP);
    return EXIT.ok;
  }
  if (values.port !== undefined && !values.http) throw new UsageError('mcp: --port needs --http');
  const port = integerOption(values.port, 'port', 0, 65535) ?? DEFAULT_HTTP_PORT;
  const config = loadConfig(values.config);
  const settings = mcpSettings(config);
  const tokens = values.http ? loadTokens(settings.tokens) : [];
  const { connector } = openConnector(config);
  try {
    const tools = toolsFor(connector);
    // stdout carries the protocol on stdio: every log line goes to stderr.
    const logger = pino({ name: 'hermes-aip-mcp' }, pino.destination({ fd: 2, sync: true }));
    const serverFor = (identity: McpIdentity) =>
      createHermesMcpServer({ connector, tools, identity, approvals: values['no-approvals'] !== true, evidence: config.ledger !== undefined, logger });
    if (!values.http) return await serveStdio(serverFor(settings.identity), logger);
    const tenant = settings.identity.tenantId === undefined ? {} : { tenantId: settings.identity.tenantId };
    return await serveHttp(port, logger, (principalId) => serverFor({ principalId, ...tenant }), tokens);
  } finally {
    await connector.close();
  }
}

function toolsFor(connector: HermesConnector): HermesTool[] {
  try {
    return buildTools(connector.capabilities());
  } catch (error) {
    if (error instanceof McpSetupError) throw new UsageError(`mcp: ${error.message}`);
    throw error;
  }
}

async function serveStdio(server: Server, logger: Logger): Promise<number> {
  // A client that closes its end of our stdout (it exited) makes our next answer fail with EPIPE:
  // the session is over, and the process ends cleanly rather than with an unhandled 'error' event.
  const clientGone = new Promise<void>((resolve) =>
    process.stdout.on('error', (error: NodeJS.ErrnoException) => {
      logger.info({ code: error.code }, 'MCP client closed its end of stdout');
      resolve();
    }),
  );
  await server.connect(new StdioServerTransport());
  logger.info({ transport: 'stdio' }, 'MCP server ready');
  // The client closing our stdin is how a stdio session ends.
  await untilInterrupted((stop) => {
    process.stdin.once('end', stop).once('close', stop);
    void clientGone.then(stop);
  });
  await server.close();
  return EXIT.ok;
}

/** Resolves on SIGINT/SIGTERM, or when `alsoWhen` calls its stop function. */
async function untilInterrupted(alsoWhen: (stop: () => void) => void = () => {}): Promise<void> {
  let stopListening = () => {};
  await new Promise<void>((resolve) => {
    stopListening = onInterrupt(resolve);
    alsoWhen(resolve);
  });
  stopListening();
}

async function serveHttp(port: number, logger: Logger, serverFor: (principalId: string) => Server, tokens: BearerToken[]): Promise<number> {
  let http: Awaited<ReturnType<typeof serveStreamableHttp>>;
  try {
    http = await serveStreamableHttp({ port, tokens, serverFor, logger });
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    throw new CliError(
      `mcp: cannot listen on 127.0.0.1:${port}: ${code === 'EADDRINUSE' ? 'the port is in use' : error instanceof Error ? error.message : String(error)}`,
    );
  }
  logger.info({ transport: 'streamable-http', url: http.url, principals: new Set(tokens.map((token) => token.principalId)).size }, 'MCP server listening');
  await untilInterrupted();
  await http.close();
  return EXIT.ok;
}
