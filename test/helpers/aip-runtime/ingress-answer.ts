/**
 * How the runtime's connector ingress answers (`signed_response`): an `event_stream` or `error`
 * envelope correlated to the request (session, correlation, `in_response_to`, `to` = its sender),
 * signed by the central key.
 */
import type { ServerResponse } from 'node:http';
import { type Envelope, signEnvelope } from '../../../src/host/wire/envelope.js';
import { messageId } from '../../../src/host/wire/ids.js';
import { rfc3339 } from '../../../src/host/wire/time.js';
import type { Party } from './deployment.js';
import { sendJson } from './http.js';

export function sendIngressAnswer(
  response: ServerResponse,
  central: Party,
  nowMs: number,
  request: Envelope | undefined,
  status: number,
  body: Record<string, unknown>,
): void {
  const reply: Envelope = {
    aip_version: '1.0',
    message_type: 'error' in body ? 'aip.core.v1.error' : 'aip.discovery.v1.event_stream_response',
    message_id: messageId(),
    sent_at: rfc3339(nowMs),
    body,
    ...(request?.session_id ? { session_id: request.session_id } : {}),
    ...(request?.correlation_id ? { correlation_id: request.correlation_id } : {}),
    ...(request?.message_id ? { in_response_to: request.message_id } : {}),
    ...(request?.from ? { to: request.from } : {}),
  };
  sendJson(response, status, signEnvelope(reply, central.key, central.principal).text);
}
