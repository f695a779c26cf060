/**
 * The torture's webhook receiver: a real loopback HTTP server in the PARENT, so that its log outlives
 * every kill of the child. Each delivery is verified with the `standardwebhooks` package and recorded
 * (webhook-id, run, sequence, arrival order). Seeded, it misbehaves on some first arrivals of an id (a
 * 5xx, a hang past the webhook's timeout, a garbage 2xx body) so that retries happen under kills too,
 * but it never misbehaves twice for one id: it is always eventually available. Like the kill proxy it
 * can be armed to hold the next delivery, before it is recorded or after (never answered), so that the
 * parent kills the child at that moment.
 */
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { Webhook } from 'standardwebhooks';
import { listenOnLoopback, readBody, type HoldPhase } from './kill-proxy.js';

/** One verified delivery as it arrived. `accepted`: it was answered 2xx (or held after being recorded). */
export interface Arrival {
  webhookId: string;
  tenantScope: string;
  endpointId: string;
  runId: string;
  sequence: number;
  order: number;
  accepted: boolean;
}

export interface WebhookReceiver {
  readonly url: string;
  /** The signing secret, `whsec_…`, for the child's secret file. */
  readonly secret: string;
  readonly arrivals: readonly Arrival[];
  /** Requests that failed verification (bad signature, headers or body). */
  readonly rejected: number;
  /** Misbehaviours by kind: 5xx, hang, garbage. */
  readonly misbehaved: Readonly<Record<string, number>>;
  /** Holds the next delivery at `phase`; resolves once it is held. */
  arm(phase: HoldPhase): Promise<void>;
  disarm(): void;
  close(): Promise<void>;
}

export interface ReceiverOptions {
  random: () => number;
  /** Share of first arrivals that are answered badly. */
  misbehaviour: number;
  /** How long a hang lasts at most (past the webhook's timeout, which ends it first). */
  hangMs: number;
}

type Misbehaviour = '5xx' | 'hang' | 'garbage';
const MISBEHAVIOURS: Misbehaviour[] = ['5xx', 'hang', 'garbage'];

interface Payload {
  data: { tenant_id: string | null; endpoint_id: string; run_id: string; sequence: number };
}

function verified(webhook: Webhook, body: string, req: IncomingMessage): Payload | null {
  try {
    return webhook.verify(body, req.headers as Record<string, string>) as Payload;
  } catch {
    return null;
  }
}

export async function startWebhookReceiver(options: ReceiverOptions): Promise<WebhookReceiver> {
  const secret = `whsec_${randomBytes(32).toString('base64')}`;
  const webhook = new Webhook(secret);
  const arrivals: Arrival[] = [];
  const seen = new Set<string>();
  const misbehaved: Record<string, number> = {};
  let rejected = 0;
  let trap: { phase: HoldPhase; held: () => void } | undefined;

  const misbehaviourFor = (webhookId: string): Misbehaviour | undefined => {
    const first = !seen.has(webhookId);
    seen.add(webhookId);
    if (!first || options.random() >= options.misbehaviour) return undefined;
    return MISBEHAVIOURS[Math.floor(options.random() * MISBEHAVIOURS.length)];
  };

  const answer = (res: ServerResponse, misbehaviour: Misbehaviour | undefined) => {
    if (misbehaviour) misbehaved[misbehaviour] = (misbehaved[misbehaviour] ?? 0) + 1;
    if (misbehaviour === '5xx') return res.writeHead(503).end('busy');
    if (misbehaviour === 'garbage') return res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":tru\u0000');
    if (misbehaviour === 'hang') {
      const timer = setTimeout(() => res.destroy(), options.hangMs);
      timer.unref();
      res.once('close', () => clearTimeout(timer));
      return;
    }
    res.writeHead(204).end();
  };

  const receive = (req: IncomingMessage, res: ServerResponse, body: string) => {
    const payload = verified(webhook, body, req);
    if (!payload) {
      rejected++;
      return res.writeHead(400).end();
    }
    const caught = trap;
    trap = undefined;
    // Held before it is recorded: the receiver never saw it, the child is killed meanwhile.
    if (caught?.phase === 'before') return caught.held();
    const webhookId = String(req.headers['webhook-id']);
    const misbehaviour = caught ? undefined : misbehaviourFor(webhookId);
    const { data } = payload;
    arrivals.push({
      webhookId,
      tenantScope: data.tenant_id ?? '',
      endpointId: data.endpoint_id,
      runId: data.run_id,
      sequence: data.sequence,
      order: arrivals.length,
      accepted: misbehaviour === undefined || misbehaviour === 'garbage',
    });
    // Recorded, never answered: the child dies before it learns the delivery was taken.
    if (caught) return caught.held();
    answer(res, misbehaviour);
  };

  const server = createServer((req, res) => {
    readBody(req).then(
      (body) => receive(req, res, body.toString('utf8')),
      () => res.destroy(),
    );
  });
  const { origin, close } = await listenOnLoopback(server);
  return {
    url: `${origin}/hooks`,
    secret,
    arrivals,
    get rejected() {
      return rejected;
    },
    misbehaved,
    arm: (phase) => new Promise<void>((held) => (trap = { phase, held })),
    disarm: () => {
      trap = undefined;
    },
    close,
  };
}
