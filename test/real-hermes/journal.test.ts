/**
 * The run event journal against the real Hermes of every installed release: a journaling connector
 * (SQLite ledger) follows each run it starts, so two readers of one run each get every event, in
 * order, while Hermes' one-subscriber stream is read once, by the follower.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect, test } from 'vitest';
import { createHermesConnector, createSqliteLedger, type AipActionResult, type RunEventsOutput } from 'aip-connector-hermes-agent';
import { checkedConnector, ENDPOINT, grantFor, nextId, type CheckedConnector } from '../helpers/harness.js';
import { describeEachReleaseWithEndpoint } from './support.js';

const names = (result: AipActionResult) => (result.output as RunEventsOutput).events.map((event) => event.event);

describeEachReleaseWithEndpoint('real Hermes %s with the run journal on', (endpoint) => {
  const journaling = async (work: (h: CheckedConnector) => Promise<void>) => {
    const dir = mkdtempSync(join(tmpdir(), 'aip-real-journal-'));
    const ledger = createSqliteLedger({ path: join(dir, 'ledger.db') });
    const { proxy, hermes } = endpoint();
    const h = checkedConnector(createHermesConnector({ endpoints: [{ id: ENDPOINT, baseUrl: proxy.url, apiKey: hermes.apiKey }], ledger, journal: {} }));
    try {
      await work(h);
    } finally {
      await h.connector.close();
      await ledger.close();
      rmSync(dir, { recursive: true, force: true });
    }
  };
  const readEvents = (h: CheckedConnector, runId: string) => h.invoke({ capability_id: h.cap('run_events'), input: { run_id: runId } });

  test('two readers of an approval run each get every event once, in order; Hermes streams it once', async () => {
    await journaling(async (h) => {
      const folder = endpoint().scratchFolder(nextId('journal'));
      const runId = await h.startRun({ input: `Run the shell command: rm -rf ./${folder.slice(folder.lastIndexOf('/') + 1)}` });
      const first = readEvents(h, runId);
      const second = readEvents(h, runId);
      const upToRequest = await h.invoke(
        { capability_id: h.cap('run_events'), input: { run_id: runId, max_events: 100 } },
        {
          onChunk: async (chunk) => {
            if (chunk.kind !== 'pending_approval') return;
            const input = { run_id: runId, choice: 'once' };
            const answered = await h.invoke({ capability_id: h.cap('run_approval'), input, idempotency_key: nextId('key') }, { approval: grantFor(input) });
            expect(answered.status, JSON.stringify(answered.error)).toBe('completed');
          },
        },
      );
      const results = [upToRequest, await first, await second];
      for (const result of results) {
        expect(result.status, JSON.stringify(result.error)).toBe('completed');
        expect(names(result)).toEqual(names(results[0] as AipActionResult));
        expect((result.output as RunEventsOutput).journal).toMatchObject({ state: 'complete', close_reason: 'run.completed' });
      }
      expect(names(upToRequest)).toContain('approval.request');
      expect(endpoint().proxy.requests.filter((request) => request === `GET /v1/runs/${runId}/events`)).toHaveLength(1);
    });
  });
});
