/**
 * A run_start whose answer is lost after Hermes accepted the run (issue 32, item 4): where the
 * endpoint declares durable run idempotency (the v0.22 profile), the connector asks again with the
 * same key and body and the caller learns the one run Hermes started; where it does not (v0.20),
 * the outcome stays uncertain and nothing is sent again.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { createHermesConnector, type AipActionResult } from 'aip-connector-hermes-agent';
import { startHermesSimulator, type HermesSimulator, type SimulatorProfile } from 'aip-connector-hermes-agent/simulator';
import { API_KEY, checkedConnector, ENDPOINT, nextId, script, type CheckedConnector } from '../helpers/harness.js';
import { startRecordingProxy, type RecordingProxy } from '../helpers/recording-proxy.js';

const PREFIX = 'connector.hermes_agent.';
const closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

/** A simulator of `profile` behind a recording proxy, and a connector pointed at the proxy. */
async function behindProxy(profile: SimulatorProfile): Promise<{ sim: HermesSimulator; proxy: RecordingProxy; h: CheckedConnector }> {
  const sim = await startHermesSimulator({ apiKey: API_KEY, profile });
  closers.push(() => sim.close());
  const proxy = await startRecordingProxy(sim.url);
  closers.push(() => proxy.close());
  const h = checkedConnector(createHermesConnector({ endpoints: [{ id: ENDPOINT, baseUrl: proxy.url, apiKey: API_KEY }] }));
  closers.push(() => h.connector.close());
  return { sim, proxy, h };
}

async function startLosingTheAnswer(h: CheckedConnector, proxy: RecordingProxy): Promise<AipActionResult> {
  proxy.loseNextStartAnswer();
  return h.invoke({ capability_id: h.cap('run_start'), input: { body: { input: 'lost answer', sim_script: script.long() } }, idempotency_key: nextId('key') });
}

const starts = (proxy: RecordingProxy) => proxy.requests.filter((request) => request === 'POST /v1/runs');

describe('a run_start whose answer is lost after Hermes accepted the run', () => {
  it('v0.22 (durable run idempotency declared): asked again, the caller gets the one run Hermes started', async () => {
    const { sim, proxy, h } = await behindProxy('v0.22');
    const result = await startLosingTheAnswer(h, proxy);

    expect(result.status, JSON.stringify(result.error)).toBe('completed');
    expect(sim.startCount()).toBe(1);
    const [run] = sim.runs();
    expect(result.output).toMatchObject({ run_id: run?.run_id, replayed: true });
    expect(result.receipt).toMatchObject({ http_status: 202, replayed: true, replayed_by: 'provider' });
    expect(starts(proxy)).toHaveLength(2);
    // The lost answer named the same run: Hermes started it once and answered the second ask from its record.
    expect(JSON.parse(proxy.startAnswers[0] ?? 'null')).toMatchObject({ run_id: run?.run_id, replayed: false });
    expect(await h.connector.evidence(result.action_id)).toMatchObject({ run_id: run?.run_id, learned_from: 'provider_replay', evidence_lost: false });
  });

  it('v0.20 (no durable idempotency declared): the outcome stays uncertain and the start is not sent again', async () => {
    const { sim, proxy, h } = await behindProxy('v0.20');
    const result = await startLosingTheAnswer(h, proxy);

    expect(result.status).toBe('failed');
    expect(result.error).toMatchObject({ code: `${PREFIX}transport`, retryable: false });
    expect(result.error?.details?.uncertain_outcome).toBe(true);
    expect(sim.startCount()).toBe(1);
    expect(starts(proxy)).toHaveLength(1);
    expect(await h.connector.evidence(result.action_id)).toBeNull();
  });

  it('v0.22: an answer that arrives is learned from the start itself', async () => {
    const { proxy, h } = await behindProxy('v0.22');
    const result = await h.invoke({
      capability_id: h.cap('run_start'),
      input: { body: { input: 'answered', sim_script: script.quick() } },
      idempotency_key: nextId('key'),
    });

    expect(result.status).toBe('completed');
    expect(result.receipt?.replayed).toBeUndefined();
    expect(starts(proxy)).toHaveLength(1);
    expect(await h.connector.evidence(result.action_id)).toMatchObject({ learned_from: 'start_answer' });
  });
});
