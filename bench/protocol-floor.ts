/**
 * The host bench's protocol floor: the least a host can do for a signed action and still answer it, as a node:http
 * server in the bench process beside the host. It reads the body, parses it with the platform's JSON.parse, checks
 * the signer is the gateway and verifies its Ed25519 signature over the envelope's sorted-key form, claims the message
 * id in a SQLite ledger, makes the same `invoke()` the bench calls directly, and answers an `action_result` envelope
 * signed over its sorted-key form. Nothing else: no serde-exact reading of numbers, no typed decode, no schema, route,
 * identity, lease or clock checks, no metrics, no logs. Measured in the host's accounting, its own processing is what
 * that accounting leaves to any host before the host checks anything the reference requires beyond the signature.
 */
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import type { AipActionResult, RunLedger } from 'aip-connector-hermes-agent';
import { type SigningKey, verifyWithDid } from '../src/host/wire/keys.js';
import { listenOnLoopback } from './echo-server.js';

export interface ProtocolFloor {
  readonly url: string;
  /** Requests it could not answer with a signed result (a bad signature, a replay, an invoke() that was not completed). */
  readonly failures: number;
  close(): Promise<void>;
}

export interface FloorParties {
  gatewayDid: string;
  key: SigningKey;
  /** Claims a message id; false for a replay. */
  claims: RunLedger;
  /** The `invoke()` of the action with this id, as the bench makes it directly. */
  invoke: (actionId: string) => Promise<AipActionResult>;
}

/** JSON with keys sorted at every depth (UTF-16 order: the bench's keys are ASCII), the platform's text for every leaf. */
function sortedJson(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value);
  if (Array.isArray(value)) return `[${value.map(sortedJson).join(',')}]`;
  const object = value as Record<string, unknown>;
  const members: string[] = [];
  for (const key of Object.keys(object).sort()) {
    if (object[key] !== undefined) members.push(`${JSON.stringify(key)}:${sortedJson(object[key])}`);
  }
  return `{${members.join(',')}}`;
}

export async function startProtocolFloor(parties: FloorParties): Promise<ProtocolFloor> {
  let failures = 0;
  // The driver posts one prepared request again and again; each is claimed under its own id, as a new message would be.
  let requests = 0;
  const answer = async (body: Buffer): Promise<string | undefined> => {
    const envelope = JSON.parse(body.toString('utf8'));
    const { signature, ...security } = envelope.security;
    if (security.did !== parties.gatewayDid || !verifyWithDid(parties.gatewayDid, sortedJson({ ...envelope, security }), signature)) return undefined;
    const claim = { message_id: `${envelope.message_id}#${++requests}`, expires_at: Date.now() + 300_000 };
    if (!(await parties.claims.claimMessage(claim, Date.now()))) return undefined;
    const result = await parties.invoke(envelope.body.action.id);
    if (result.status !== 'completed') return undefined;
    const response = {
      aip_version: '1.0',
      message_type: 'aip.core.v1.action_result',
      message_id: `msg_${randomBytes(16).toString('hex')}`,
      sent_at: new Date().toISOString(),
      body: { action_result: { action_id: envelope.body.action.id, status: result.status, output: result.output } },
      correlation_id: envelope.correlation_id,
      in_response_to: envelope.message_id,
      from: { id: 'agent:hermes_agent:connector', kind: 'agent', did: parties.key.did },
      to: envelope.from,
      security: { did: parties.key.did } as Record<string, string>,
    };
    response.security.signature = parties.key.sign(sortedJson(response));
    return JSON.stringify(response);
  };
  const server = createServer({ keepAliveTimeout: 30_000 }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.once('end', () => {
      answer(Buffer.concat(chunks)).then(
        (text) => {
          if (text === undefined) failures++;
          const sent = text ?? '';
          res.writeHead(text === undefined ? 401 : 200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(sent) }).end(sent);
        },
        () => {
          failures++;
          res.writeHead(500, { 'content-length': 0 }).end();
        },
      );
    });
  });
  const listening = await listenOnLoopback(server);
  return {
    url: `${listening.origin}/aip/v1/messages`,
    get failures() {
      return failures;
    },
    close: listening.close,
  };
}
