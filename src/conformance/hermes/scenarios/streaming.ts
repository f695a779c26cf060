import type { AipStreamChunk, RunEventsOutput } from '../../../index.js';
import type { ScenarioEvidence } from '../../kit/types.js';
import { codeOf, outcome, type Harness } from '../harness.js';

/** How long the kit's consumer holds each chunk: the reader must wait for it. */
const CONSUMER_DELAY_MS = 10;
const FINAL_KINDS = new Set(['done', 'error']);

/** Gap-free chunks while the stream is open, a reader that waits for its consumer, one final chunk, a bound that holds. */
export async function streamingBackpressure(h: Harness): Promise<ScenarioEvidence> {
  const connector = h.connector();
  const run = await h.startRun(connector, 'harmless');
  let settled = false;
  let firstWhileOpen: boolean | undefined;
  let inFlight = 0;
  let maxInFlight = 0;
  const pending = h.readEvents(connector, run.runId, {
    onChunk: async () => {
      firstWhileOpen ??= !settled;
      maxInFlight = Math.max(maxInFlight, ++inFlight);
      await h.clock.sleep(CONSUMER_DELAY_MS);
      inFlight--;
    },
  });
  const ordered = await pending;
  settled = true;
  const gapFree = ordered.chunks.every((chunk, index) => chunk.sequence === index);
  const orderedOk = ordered.result.status === 'completed' && ordered.chunks.length > 0 && gapFree && firstWhileOpen === true;

  const bounded = await h.startRun(connector, 'harmless');
  const truncated = await h.readEvents(connector, bounded.runId, { maxEvents: 1 });
  const output = truncated.result.output as RunEventsOutput | undefined;
  const boundHeld = codeOf(truncated.result) === 'stream_truncated' && output?.events.length === 1 && output.truncated === true;
  const backpressure = maxInFlight === 1 && boundHeld;

  const finalChunks = (chunks: AipStreamChunk[]) => chunks.filter((chunk) => FINAL_KINDS.has(chunk.kind));
  const uniqueFinal = [ordered.chunks, truncated.chunks].every(
    (chunks) => finalChunks(chunks).length === 1 && FINAL_KINDS.has(chunks[chunks.length - 1]?.kind ?? ''),
  );

  return {
    source: h.provider.source,
    assertions: {
      ordered_chunks: outcome(
        orderedOk,
        orderedOk
          ? `${ordered.chunks.length} chunks with sequences 0..${ordered.chunks.length - 1}, the first delivered while the call was still open`
          : `sequences ${ordered.chunks.map((chunk) => chunk.sequence).join(',')}; first chunk while open: ${String(firstWhileOpen)}; stream ${codeOf(ordered.result) ?? ordered.result.status}`,
      ),
      bounded_backpressure: outcome(
        backpressure,
        backpressure
          ? `the reader never had more than one chunk waiting on a consumer that held each for ${CONSUMER_DELAY_MS} ms, and max_events 1 ended the stream as stream_truncated with one event`
          : `at most ${maxInFlight} chunks were with the consumer at once; max_events 1 answered ${codeOf(truncated.result) ?? truncated.result.status} with ${String(output?.events.length)} event(s)`,
      ),
      terminal_chunk_unique: outcome(
        uniqueFinal,
        uniqueFinal
          ? 'both streams (completed and truncated) ended with exactly one final chunk'
          : `final chunks: ${finalChunks(ordered.chunks).length} and ${finalChunks(truncated.chunks).length}`,
      ),
    },
    artifacts: [ordered.action.id, run.runId, truncated.action.id, bounded.runId],
    hostRoles: ['a slow chunk consumer (the runtime’s stream publisher)'],
    observations: {
      ordered: {
        action_id: ordered.action.id,
        kinds: ordered.chunks.map((chunk) => chunk.kind),
        sequences: ordered.chunks.map((chunk) => chunk.sequence),
        first_while_open: firstWhileOpen ?? null,
        max_chunks_with_consumer: maxInFlight,
      },
      truncated: {
        action_id: truncated.action.id,
        code: truncated.result.error?.code ?? null,
        events: output?.events.length ?? null,
        kinds: truncated.chunks.map((chunk) => chunk.kind),
      },
    },
    detail: 'chunks observed through the runtime-side onChunk publisher',
  };
}
