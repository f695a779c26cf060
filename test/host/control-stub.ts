/**
 * A minimal loopback control plane for the lease tests: it verifies each request's signature by the
 * host's DID, records it, and answers as `answer` decides (a signed lease, a signed refusal, garbage,
 * a wrongly signed or unsigned lease, a signed `offline` outcome whatever was asked, or a dropped connection). The full reference-shaped double is
 * test/helpers/aip-runtime (host-runtime's).
 */
import { randomBytes } from 'node:crypto';
import { createServer, type RequestListener, type Server } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { canonicalJson, parseWire, wireJson } from '../../src/host/wire/json.js';
import { type SigningKey, signingKeyFromSeed, verifyWithDid } from '../../src/host/wire/keys.js';
import { rfc3339, timeArray } from '../../src/host/wire/time.js';

export type ControlAnswer = 'grant' | 'reject' | 'unavailable' | 'drop' | 'garbage' | 'wrong-key' | 'unsigned' | 'expired-lease' | 'offline-outcome';

export interface ControlRecord {
  readonly operation: string;
  readonly requestId: string;
  readonly payload: Record<string, any>;
  readonly verified: boolean;
  readonly text: string;
  /** The sequence granted, when it was. */
  granted?: number;
}

export interface ControlStub {
  readonly url: string;
  readonly did: string;
  readonly records: ControlRecord[];
  /** Decides each answer (default: grant everything). */
  answer: (record: ControlRecord) => ControlAnswer;
  /** Holds an answer back until the promise settles (default: answers at once). */
  hold: (record: ControlRecord) => Promise<void> | undefined;
  leaseTtlMs: number;
  close(): Promise<void>;
}

/** A stub on loopback; over HTTPS with `tls` (a key and certificate). */
export async function startControlStub(hostDid: string, tls?: { key: string; cert: string }): Promise<ControlStub> {
  const key = signingKeyFromSeed(randomBytes(32));
  const stranger = signingKeyFromSeed(randomBytes(32));
  const records: ControlRecord[] = [];
  const granted = new Map<string, number>();
  let sequence = 0;
  const stub: ControlStub = {
    url: '',
    did: key.did,
    records,
    answer: () => 'grant',
    hold: () => undefined,
    leaseTtlMs: 30_000,
    close: async () => {},
  };
  const listener: RequestListener = (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', async () => {
      const text = Buffer.concat(chunks).toString('utf8');
      const record = recordOf(text, hostDid);
      records.push(record);
      await stub.hold(record);
      const decision = stub.answer(record);
      if (decision === 'drop') return res.socket?.destroy();
      if (decision === 'garbage') return res.writeHead(200, { 'content-type': 'application/json' }).end('{"response": not json');
      if (decision === 'reject' || decision === 'unavailable') {
        const outcome = {
          status: 'rejected',
          code: `connector_control.${decision === 'reject' ? 'rejected' : 'unavailable'}`,
          message: 'refused by the stub',
          retryable: decision === 'unavailable',
        };
        return send(res, decision === 'reject' ? 403 : 503, signed(key, record.requestId, outcome));
      }
      if (decision === 'offline-outcome') return send(res, 200, signed(key, record.requestId, { status: 'offline' }));
      const previous = granted.get(record.requestId);
      const now = Date.now();
      const grantedSequence = previous ?? ++sequence;
      granted.set(record.requestId, grantedSequence);
      record.granted = grantedSequence;
      const expiresAt = decision === 'expired-lease' ? now - 1 : now + stub.leaseTtlMs;
      const outcome =
        record.operation === 'offline' ? { status: 'offline' } : { status: 'lease', lease: { sequence: grantedSequence, expires_at: timeArray(expiresAt) } };
      const body = signed(decision === 'wrong-key' ? stranger : key, record.requestId, outcome, decision === 'wrong-key' ? key.did : undefined);
      if (decision === 'unsigned') delete (body as { signature?: string }).signature;
      send(res, 200, body);
    });
  };
  const server: Server = tls === undefined ? createServer(listener) : createHttpsServer(tls, listener);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return Object.assign(stub, {
    url: `${tls === undefined ? 'http' : 'https'}://127.0.0.1:${port}/aip/v1/connector-control`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  });
}

function recordOf(text: string, hostDid: string): ControlRecord {
  const parsed = parseWire(text);
  if ('error' in parsed) return { operation: 'unparsable', requestId: '', payload: {}, verified: false, text };
  const body = parsed.value as Record<string, any>;
  const request = body['request'] ?? {};
  const verified = request.signer_did === hostDid && verifyWithDid(hostDid, parsed.canonical([], ['request']), body['signature']);
  return { operation: request.command?.operation, requestId: request.request_id, payload: request.command?.payload ?? {}, verified, text };
}

/** `{response, signature}` signed by `key`; `claimedDid` lets a stranger's key claim the control plane's DID. */
function signed(key: SigningKey, requestId: string, outcome: object, claimedDid?: string): object {
  const now = Date.now();
  const response = { request_id: requestId, issued_at: rfc3339(now), expires_at: rfc3339(now + 30_000), signer_did: claimedDid ?? key.did, outcome };
  return { response, signature: key.sign(canonicalJson(response)) };
}

function send(res: import('node:http').ServerResponse, status: number, body: object): void {
  res.writeHead(status, { 'content-type': 'application/json' }).end(wireJson(body));
}
