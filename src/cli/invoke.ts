import { randomBytes } from 'node:crypto';
import { parseArgs } from 'node:util';
import type { AipAction, AipStreamChunk, ApprovalGrant, ExecutionContext } from '../index.js';
import { typedId } from '../internal/ids.js';
import { HELP_OPTION, parseCommand, readJsonArgument } from './args.js';
import { openConnector, loadConfig } from './config.js';
import { EXIT, UsageError } from './errors.js';
import { INVOKE_HELP } from './help.js';
import { onInterrupt } from './signals.js';

const CAPABILITY_ID_SHAPE = /^cap:hermes_agent:[a-z0-9_-]{1,128}:[a-z_]{1,32}$/;

export async function invokeCommand(args: string[]): Promise<number> {
  const { values, positionals } = parseCommand('invoke', args, (argv) =>
    parseArgs({
      args: argv,
      strict: true,
      allowPositionals: true,
      options: {
        config: { type: 'string' },
        input: { type: 'string' },
        'idempotency-key': { type: 'string' },
        approval: { type: 'string' },
        tenant: { type: 'string' },
        help: HELP_OPTION,
      },
    }),
  );
  if (values.help) {
    process.stdout.write(INVOKE_HELP);
    return EXIT.ok;
  }
  if (positionals.length !== 1) throw new UsageError('invoke: expected exactly one capability id (see hermes-aip invoke --help)');
  const capabilityId = positionals[0] as string;
  if (values.input === undefined) throw new UsageError('invoke: --input <json|@file> is required');
  const input = readJsonArgument(values.input, '--input');
  const approval = values.approval === undefined ? undefined : readJsonArgument(values.approval, '--approval');
  if (approval !== undefined && (typeof approval !== 'object' || approval === null || Array.isArray(approval))) {
    throw new UsageError('--approval must be a JSON object (an AIP approval grant)');
  }

  const { connector } = openConnector(loadConfig(values.config));
  const interrupt = new AbortController();
  const stopListening = onInterrupt(() => interrupt.abort());
  try {
    if (!connector.capability(capabilityId)) {
      const known = connector.capabilities().map((capability) => capability.id);
      // Quoted only when shaped like a capability id: a key pasted in its place must not be echoed.
      const named = CAPABILITY_ID_SHAPE.test(capabilityId) ? ` ${capabilityId}` : '';
      throw new UsageError(`invoke: unknown capability id${named}; this configuration has ${known.join(', ')}`);
    }
    const streaming = capabilityId.endsWith(':run_events');
    const action: AipAction = { id: typedId('act_'), capability_id: capabilityId, input };
    if (values['idempotency-key'] !== undefined) action.idempotency_key = values['idempotency-key'];
    const context: ExecutionContext = {
      signal: interrupt.signal,
      actor: { principalId: 'hermes-aip-cli' },
      traceId: `trace_${randomBytes(16).toString('hex')}`,
    };
    if (values.tenant !== undefined) context.tenantId = values.tenant;
    if (approval !== undefined) context.approval = approval as ApprovalGrant;
    if (streaming) context.onChunk = (chunk) => writeLine(chunk);
    const result = await connector.invoke(action, context);
    process.stdout.write(streaming ? `${JSON.stringify(result)}\n` : `${JSON.stringify(result, null, 2)}\n`);
    if (interrupt.signal.aborted) return EXIT.interrupted;
    return result.status === 'completed' ? EXIT.ok : EXIT.failed;
  } finally {
    stopListening();
    await connector.close();
  }
}

/** One chunk as one JSON line, resolved once written (back-pressure for the connector's reader). */
function writeLine(chunk: AipStreamChunk): Promise<void> {
  return new Promise((resolve, reject) => {
    process.stdout.write(`${JSON.stringify(chunk)}\n`, (error) => (error ? reject(error) : resolve()));
  });
}
