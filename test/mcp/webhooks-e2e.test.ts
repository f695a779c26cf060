/**
 * Webhooks through the config file of `hermes-aip mcp` (a process that lives on after the call): a run
 * started through its run_start tool is journaled and every event reaches a loopback receiver that
 * verifies each with `standardwebhooks`, in the journal's order, equal to what run_events reads.
 */
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { HermesSseEvent, RunEventsOutput } from '../../src/contract/aip.js';
import { eventually } from '../helpers/harness.js';
import { secretFile, startReceiver } from '../helpers/webhooks.js';
import { call, simulatorWithConfig, startRun, stdioClient, writeConfig } from './helpers.js';

interface Payload {
  data: { run_id: string; sequence: number; event: HermesSseEvent };
}

describe('hermes-aip mcp with "webhooks" in its config file', { timeout: 60_000 }, () => {
  it('delivers every event of a run started through its tool, verified and in order', async () => {
    const { sim, folder } = await simulatorWithConfig();
    const secret = secretFile();
    const receiver = await startReceiver(secret.secret);
    const configPath = writeConfig(folder, sim.url, {
      ledger: { sqlite: join(folder, 'ledger.db') },
      journal: {},
      webhooks: [{ url: receiver.url, secretFile: secret.path, allowLoopbackHttp: true }],
    });
    try {
      const { client } = await stdioClient(['--config', configPath]);
      const script = [
        { type: 'delta', text: 'Hello' },
        { type: 'delta', text: ' hook' },
        { type: 'complete', output: 'Hello hook' },
      ];
      const runId = await startRun(client, { input: 'hooked', sim_script: script }, 'mcp-hook-1');
      const read = await call(client, 'hermes_local_run_events', { run_id: runId });
      const journaled = (read.structuredContent as unknown as RunEventsOutput).events;
      expect(journaled.map((event) => event.event)).toEqual(sim.run(runId)?.events.map((event) => event['event']));

      await eventually(() => receiver.deliveries.length >= journaled.length || undefined, 'every event delivered');
      expect(receiver.deliveries.map((delivery) => delivery.error)).toEqual(journaled.map(() => undefined));
      const payloads = receiver.deliveries.map((delivery) => delivery.verified as Payload);
      expect(payloads.map((payload) => payload.data.run_id)).toEqual(journaled.map(() => runId));
      expect(payloads.map((payload) => payload.data.event)).toEqual(journaled);
      expect(payloads.map((payload) => payload.data.sequence)).toEqual(journaled.map((_, index) => index + 1));
    } finally {
      await receiver.close();
    }
  });
});
