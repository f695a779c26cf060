import { randomBytes } from 'node:crypto';
import type { ScenarioEvidence } from '../../kit/types.js';
import { type Harness, type Invocation, kitId, outcome } from '../harness.js';

/** Every dispatched call has a receipt, every log line and request correlates with its action, nothing sensitive is written. */
export async function auditRedaction(h: Harness): Promise<ScenarioEvidence> {
  const connector = h.connector();
  const sessionKey = `conformance-session-key-${randomBytes(12).toString('hex')}`;
  const providerCanary = `conformance-provider-body-${randomBytes(12).toString('hex')}`;
  const traces = new Map<string, string>();
  const traced = async (call: (traceId: string) => Promise<Invocation>) => {
    const traceId = kitId('corr_');
    const invocation = await call(traceId);
    traces.set(invocation.action.id, traceId);
    return invocation;
  };
  const start = await traced((traceId) => h.startRun(connector, 'harmless', { extraInput: { session_key: sessionKey }, context: { traceId } }));
  const runId = (start.result.output as { run_id: string }).run_id;
  const events = await traced((traceId) => h.readEvents(connector, runId, { context: { traceId } }));
  const status = await traced((traceId) => h.invoke(connector, 'run_status', { run_id: runId }, { context: { traceId } }));
  h.proxy.arm({
    method: 'GET',
    path: new RegExp(`^/v1/runs/${runId}$`),
    respond: { status: 400, body: JSON.stringify({ error: { message: providerCanary, code: 'bad_request' } }) },
  });
  const rejected = await traced((traceId) => h.invoke(connector, 'run_status', { run_id: runId }, { context: { traceId } }));
  const calls = [start, events, status, rejected];

  const receiptProblems = calls.flatMap((call) => {
    const receipt = call.result.receipt;
    const sent = call.requests[0];
    if (!receipt) return [`${call.action.id} has no receipt`];
    const ok =
      /^rcpt_[0-9a-f]{32}$/.test(receipt.receipt_id) &&
      receipt.capability_id === call.action.capability_id &&
      receipt.http_status === sent?.status &&
      receipt.started_at <= receipt.completed_at;
    return ok ? [] : [`${call.action.id}'s receipt does not match its request ${sent?.id ?? '(none)'}`];
  });
  const lines = h.logLines.map((line) => JSON.parse(line) as Record<string, unknown>);
  const correlationProblems = calls.flatMap((call) => {
    const logged = lines.some(
      (line) => line['action_id'] === call.action.id && line['capability_id'] === call.action.capability_id && line['endpoint_id'] === h.provider.endpointId,
    );
    const forwarded = call.requests.every((request) => request.headers['x-aip-trace-id'] === traces.get(call.action.id));
    return [...(logged ? [] : [`no log line names ${call.action.id}`]), ...(forwarded ? [] : [`a request of ${call.action.id} lost its trace id`])];
  });
  const sensitiveAbsent = h.secretAbsent(sessionKey) && h.secretAbsent(providerCanary);
  const secretAbsent = h.secretAbsent(h.provider.apiKey, [connector.manifest()]);

  return {
    source: h.provider.source,
    assertions: {
      receipts_emitted: outcome(
        receiptProblems.length === 0,
        receiptProblems.length === 0
          ? `${calls.length} dispatched calls each carried a receipt matching the request the proxy saw (capability, HTTP status, times)`
          : receiptProblems.join('; '),
      ),
      audit_correlated: outcome(
        correlationProblems.length === 0,
        correlationProblems.length === 0
          ? 'every call has log lines naming its action, capability and endpoint, and every request it sent carried its trace id'
          : correlationProblems.join('; '),
      ),
      sensitive_fields_redacted: outcome(
        sensitiveAbsent,
        sensitiveAbsent
          ? 'the session key (confidential input) and a provider error body appear in no log line at trace level, result or chunk'
          : 'a session key or provider body was written into a log line, result or chunk',
      ),
      raw_secret_absent: outcome(
        secretAbsent,
        secretAbsent
          ? 'the API key appears in no log line at trace level, result, chunk, receipt or the manifest'
          : 'the API key was written somewhere the kit could read',
      ),
    },
    artifacts: [...calls.map((call) => call.action.id), runId, ...calls.flatMap((call) => call.requests.map((request) => request.id))],
    hostRoles: ['log sink (pino at trace level) and trace context'],
    observations: {
      receipts: calls.map((call) => ({
        action_id: call.action.id,
        receipt_id: call.result.receipt?.receipt_id ?? null,
        http_status: call.result.receipt?.http_status ?? null,
        proxy_request: call.requests[0]?.id ?? null,
      })),
      log_lines: h.logLines.length,
    },
    detail: 'receipts, log lines and provider requests joined by action id and trace id',
  };
}
