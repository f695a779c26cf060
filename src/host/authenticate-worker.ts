/**
 * The worker thread of the authentication lane (`lane.ts`): each message is one body, each reply what
 * `authenticate` made of it. It holds the host's signing key (cloned into the thread, never serialised) to
 * sign its 401 answers, and nothing else of the host.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { type AuthenticationContext, authenticate } from './authenticate.js';
import type { PinnedIdentity } from './checks.js';
import type { WorkerReply } from './lane.js';
import { signingKeyFromKeyObject } from './wire/keys.js';

const data = workerData as { key: Parameters<typeof signingKeyFromKeyObject>[0]; pinned: PinnedIdentity };
const context: AuthenticationContext = { key: signingKeyFromKeyObject(data.key), pinned: data.pinned, now: Date.now };
const port = parentPort;

port?.on('message', (body: Uint8Array) => {
  let reply: WorkerReply;
  try {
    const outcome = authenticate(Buffer.from(body.buffer, body.byteOffset, body.byteLength), context);
    reply = { outcome: 'early' in outcome ? outcome.early : 'authenticated' };
  } catch (error) {
    reply = { failed: error instanceof Error ? error.name : typeof error };
  }
  port.postMessage(reply);
});
