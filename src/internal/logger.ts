import { pino, type Logger } from 'pino';

/** Paths pino censors in every line the connector writes, whatever a host's own serializers add. */
const REDACT_PATHS = ['authorization', 'headers.authorization', '*.authorization', 'apiKey', '*.apiKey', 'api_key', '*.api_key', 'headers["x-api-key"]'];

const silent: Logger = pino({ level: 'silent' });

/** The connector's logger: the host's, with credentials redacted, or a silent one. */
export function connectorLogger(host: Logger | undefined): Logger {
  return host ? host.child({ component: 'aip-connector-hermes-agent' }, { redact: { paths: REDACT_PATHS, censor: '[REDACTED]' } }) : silent;
}

/** One child per invocation, so every line names its action, capability and endpoint (no bindings built for the silent logger). */
export function invocationLogger(base: Logger, actionId: string, capabilityId: string, endpointId: string): Logger {
  return base === silent ? silent : base.child({ action_id: actionId, capability_id: capabilityId, endpoint_id: endpointId });
}

/** Whether `logger` writes lines at `level`; without a host logger, no call into pino (this runs on every invocation). */
export function writesAt(logger: Logger, level: 'trace' | 'info'): boolean {
  return logger !== silent && logger.isLevelEnabled(level);
}

/** What a log line may say of an error: its class name only, since a driver's message may quote its connection string or SQL parameters. */
export function errorName(error: unknown): string {
  return error instanceof Error ? error.name : typeof error;
}
