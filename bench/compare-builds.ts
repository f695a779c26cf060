/**
 * `npx tsx bench/compare-builds.ts <other package folder> [--rounds N]`: the built connector here
 * against another build of the package (say, a worktree of an earlier commit after `npm run
 * build`), side by side in interleaved rounds on the bench server: run_status throughput at
 * concurrency 64 and a 100k-event stream, each with the client's CPU per request or event. Answers "did this change cost anything?" with the
 * noise of one machine in one run, not of two runs on different days.
 */
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { HermesConnector, HermesConnectorOptions } from 'aip-connector-hermes-agent';
import { ENDPOINT_ID, newConnector } from './clients.js';
import { fullGc } from './heap.js';
import { pairedFigure, type Figure } from './report.js';
import { CONCURRENCY, concurrentRound, connectorCall, slice, type ConcurrentRound, type Slice } from './request-overhead.js';
import { BENCH_API_KEY, expectedText, startBenchServer } from './servers.js';
import { interleave } from './stats.js';
import { STREAM_EVENTS, connectorRound, type StreamRound } from './stream-throughput.js';

async function otherConnector(packageFolder: string, origin: string): Promise<HermesConnector> {
  const entry = pathToFileURL(resolve(packageFolder, 'dist/index.js')).href;
  const other = (await import(entry)) as { createHermesConnector(options: HermesConnectorOptions): HermesConnector };
  return other.createHermesConnector({ endpoints: [{ id: ENDPOINT_ID, baseUrl: origin, apiKey: BENCH_API_KEY }] });
}

function figureLine(figure: Figure): string {
  const { ratio, connector: current, bare: other } = figure;
  if (!ratio || !current || !other) return `${figure.label}: not measured`;
  const number = (value: number) => (value < 100 ? value.toFixed(2) : value.toFixed(0)).padStart(8);
  return `${figure.label.padEnd(48)} this ${number(current.median)}  other ${number(other.median)}  this/other ${ratio.median.toFixed(3)} [${ratio.min.toFixed(3)}–${ratio.max.toFixed(3)}]`;
}

async function main(): Promise<void> {
  const [folder, flag, value] = process.argv.slice(2);
  if (!folder) throw new Error('usage: npx tsx bench/compare-builds.ts <other package folder> [--rounds N]');
  const rounds = flag === '--rounds' ? Number(value) : 7;
  const server = await startBenchServer([STREAM_EVENTS]);
  const current = newConnector(server.origin);
  const other = await otherConnector(folder, server.origin);
  const text = expectedText(STREAM_EVENTS);
  try {
    for (const connector of [current, other]) await slice(connectorCall(connector), 2000, CONCURRENCY);
    const requests = await interleave<Slice, 'bare' | 'connector', ConcurrentRound>(
      { bare: () => slice(connectorCall(other), 1500, CONCURRENCY), connector: () => slice(connectorCall(current), 1500, CONCURRENCY) },
      { rounds, warmupRounds: 1, slices: 8, merge: concurrentRound, beforeRound: () => fullGc(1) },
    );
    const streams = await interleave<StreamRound, 'bare' | 'connector'>(
      { bare: () => connectorRound(other, text, false), connector: () => connectorRound(current, text, false) },
      { rounds, warmupRounds: 1, before: () => fullGc(1) },
    );
    const figures = [
      pairedFigure(
        { id: 'throughput', label: `run_status req/s, concurrency ${CONCURRENCY}`, unit: 'req/s' },
        requests.rounds.bare.map((round) => round.req_per_s),
        requests.rounds.connector.map((round) => round.req_per_s),
      ),
      pairedFigure(
        { id: 'throughput_cpu', label: 'run_status client CPU µs per request', unit: 'us' },
        requests.rounds.bare.map((round) => round.cpu_us_per_request),
        requests.rounds.connector.map((round) => round.cpu_us_per_request),
      ),
      pairedFigure(
        { id: 'stream', label: `run_events ${STREAM_EVENTS} events, events/s`, unit: 'events/s' },
        streams.rounds.bare.map((round) => round.events_per_s),
        streams.rounds.connector.map((round) => round.events_per_s),
      ),
      pairedFigure(
        { id: 'stream_cpu', label: 'run_events client CPU µs per event', unit: 'us' },
        streams.rounds.bare.map((round) => round.cpu_us_per_event),
        streams.rounds.connector.map((round) => round.cpu_us_per_event),
      ),
    ];
    console.log(`${rounds} interleaved rounds; median [min–max] of the per-round ratio`);
    for (const figure of figures) console.log(figureLine(figure));
  } finally {
    await current.close();
    await other.close();
    await server.close();
  }
}

main().catch((error: unknown) => {
  console.error(error instanceof Error ? error.message : error);
  process.exitCode = 1;
});
