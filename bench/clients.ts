/**
 * The two sides of every comparison. The connector is the built package (dist/, imported by its
 * package name) with its defaults: its own keep-alive Pool per endpoint and no logger (silent).
 * The baseline is bare undici: `request()` on a Pool of its own with the same options, the same
 * request headers the connector sends, then `JSON.parse` (status) or eventsource-parser +
 * `JSON.parse` (stream), producing the same aggregate the connector returns.
 */
import { USER_AGENT, createHermesConnector, type HermesConnector } from 'aip-connector-hermes-agent';
import { createParser } from 'eventsource-parser';
import { Pool, request, type Dispatcher } from 'undici';
import { BENCH_API_KEY } from './servers.js';

export const ENDPOINT_ID = 'bench';

export function capabilityId(operation: 'run_status' | 'run_events'): string {
  return `cap:hermes_agent:${ENDPOINT_ID}:${operation}`;
}

export function newConnector(origin: string): HermesConnector {
  return createHermesConnector({ endpoints: [{ id: ENDPOINT_ID, baseUrl: origin, apiKey: BENCH_API_KEY }] });
}

/** A keep-alive Pool like the connector's default one (unbounded connections, 10 s connect timeout). */
export function newBarePool(origin: string): Pool {
  return new Pool(origin, { connect: { timeout: 10_000 } });
}

function bareHeaders(accept: string): Record<string, string> {
  return { authorization: `Bearer ${BENCH_API_KEY}`, 'user-agent': USER_AGENT, accept };
}

/** GET /v1/runs/{id} + JSON.parse; throws unless it is a 200 with a JSON object. */
export async function bareStatus(pool: Pool, origin: string, runId: string): Promise<unknown> {
  const { statusCode, body } = await request(`${origin}/v1/runs/${encodeURIComponent(runId)}`, {
    dispatcher: pool,
    method: 'GET',
    headers: bareHeaders('application/json'),
  });
  const value = JSON.parse(await body.text()) as unknown;
  if (statusCode !== 200 || value === null || typeof value !== 'object') throw new Error(`bare run_status got HTTP ${statusCode}`);
  return value;
}

export interface BareStreamResult {
  events: { event: string; data: Record<string, unknown> }[];
  text: string;
  terminal: boolean;
}

/**
 * The honest floor of a JSON read: GET /v1/runs/{id} through the Pool's own `dispatch()` with a
 * minimal handler that only collects the body chunks, then `Buffer#toString` + `JSON.parse` at
 * the end. No response stream, no status or content-type policy, no UTF-8 validation: what any
 * client built on undici has to do at the least.
 */
export function bareDispatchStatus(pool: Dispatcher, origin: string, runId: string): Promise<unknown> {
  const options: Dispatcher.DispatchOptions = {
    origin,
    path: `/v1/runs/${encodeURIComponent(runId)}`,
    method: 'GET',
    headers: bareHeaders('application/json'),
  };
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let statusCode = 0;
    pool.dispatch(options, {
      onRequestStart() {},
      onResponseStart(_controller, status) {
        statusCode = status;
      },
      onResponseData(_controller, chunk) {
        chunks.push(chunk);
      },
      onResponseEnd() {
        try {
          const value = JSON.parse((chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks)).toString()) as unknown;
          if (statusCode !== 200 || value === null || typeof value !== 'object') throw new Error(`bare dispatch run_status got HTTP ${statusCode}`);
          resolve(value);
        } catch (error) {
          reject(error);
        }
      },
      onResponseError(_controller, error) {
        reject(error);
      },
    });
  });
}

/**
 * GET /v1/runs/{id}/events read with eventsource-parser + JSON.parse into the same aggregate the
 * connector builds (events [{event, data}], joined delta text), stopping at a terminal event or
 * after `maxEvents` events, as the connector does.
 */
export async function bareStream(pool: Pool, origin: string, runId: string, maxEvents: number): Promise<BareStreamResult> {
  const { statusCode, body } = await request(`${origin}/v1/runs/${encodeURIComponent(runId)}/events`, {
    dispatcher: pool,
    method: 'GET',
    headers: bareHeaders('text/event-stream'),
  });
  if (statusCode !== 200) {
    await body.dump();
    throw new Error(`bare run_events got HTTP ${statusCode}`);
  }
  const events: BareStreamResult['events'] = [];
  const text: string[] = [];
  let terminal = false;
  let stop = false;
  const parser = createParser({
    onEvent(message) {
      if (stop) return;
      const data = JSON.parse(message.data) as Record<string, unknown>;
      const event = data.event as string;
      events.push({ event, data });
      if (event === 'message.delta') text.push(data.delta as string);
      terminal = event === 'run.completed' || event === 'run.failed' || event === 'run.cancelled';
      stop = terminal || events.length >= maxEvents;
    },
  });
  const decoder = new TextDecoder();
  // Leaving the loop early destroys the body, as the connector does.
  for await (const chunk of body as AsyncIterable<Buffer>) {
    parser.feed(decoder.decode(chunk, { stream: true }));
    if (stop) break;
  }
  return { events, text: text.join(''), terminal };
}
