import type { AipStreamChunk, HermesConnector, RunEventsOutput } from '../../../index.js';
import type { ScenarioEvidence } from '../../kit/types.js';
import { codeOf, outcome, type Harness, type Invocation } from '../harness.js';

/** How long the kit's consumer holds each chunk after the first: the reader must wait for it. */
const CONSUMER_DELAY_MS = 10;
/**
 * How long the consumer keeps the first chunk once the provider's whole stream went to the
 * connector: time for a reader that does not wait for its consumer to read on and show it.
 */
const FIRST_CHUNK_HOLD_MS = 100;
/** The longest the kit waits on the connector or the provider while holding (at most a quarter of a step). */
const HOLD_BOUND_MS = 2_000;
const FINAL_KINDS = new Set(['done', 'error']);

/** What one run_events call did while the kit held the provider's stream, then its first chunk. */
interface HeldRead {
  invocation: Invocation;
  /** The first chunk reached the consumer before the run's terminal event reached the connector. */
  firstBeforeTerminal: boolean | undefined;
  /** The call returned while its first chunk was still with the consumer. */
  settledWhileFirstHeld: boolean;
  maxInFlight: number;
}

/** Chunks before the run's end reaches the connector, gap-free; a reader that waits for its consumer; one final chunk; a bound that holds. */
export async function streamingBackpressure(h: Harness): Promise<ScenarioEvidence> {
  const connector = h.connector();
  const run = await h.startRun(connector, 'harmless');
  const { invocation: ordered, firstBeforeTerminal, settledWhileFirstHeld, maxInFlight } = await readHeld(h, connector, run.runId);
  const gapFree = ordered.chunks.every((chunk, index) => chunk.sequence === index);
  const orderedOk = ordered.result.status === 'completed' && ordered.chunks.length > 0 && gapFree && firstBeforeTerminal === true;

  const bounded = await h.startRun(connector, 'harmless');
  const truncated = await h.readEvents(connector, bounded.runId, { maxEvents: 1 });
  const output = truncated.result.output as RunEventsOutput | undefined;
  const boundHeld = codeOf(truncated.result) === 'stream_truncated' && output?.events.length === 1 && output.truncated === true;
  const backpressure = maxInFlight === 1 && !settledWhileFirstHeld && boundHeld;

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
          ? `${ordered.chunks.length} chunks with sequences 0..${ordered.chunks.length - 1}, the first delivered while the kit still held back the run's terminal event`
          : `sequences ${ordered.chunks.map((chunk) => chunk.sequence).join(',')}; first chunk before the terminal event was sent: ${String(firstBeforeTerminal)}; stream ${codeOf(ordered.result) ?? ordered.result.status}`,
      ),
      bounded_backpressure: outcome(
        backpressure,
        backpressure
          ? `while the consumer held the first chunk past the end of the provider's stream, the reader passed on nothing more and the call stayed open; never more than one chunk with a consumer that held each later one for ${CONSUMER_DELAY_MS} ms; max_events 1 ended the stream as stream_truncated with one event`
          : `at most ${maxInFlight} chunks were with the consumer at once; the call ${settledWhileFirstHeld ? 'returned' : 'stayed open'} while the first chunk was held; max_events 1 answered ${codeOf(truncated.result) ?? truncated.result.status} with ${String(output?.events.length)} event(s)`,
      ),
      terminal_chunk_unique: outcome(
        uniqueFinal,
        uniqueFinal
          ? 'both streams (completed and truncated) ended with exactly one final chunk'
          : `final chunks: ${finalChunks(ordered.chunks).length} and ${finalChunks(truncated.chunks).length}`,
      ),
    },
    artifacts: [ordered.action.id, run.runId, truncated.action.id, bounded.runId],
    hostRoles: ['a slow chunk consumer (the runtime’s stream publisher)', 'a provider whose terminal event waits (the kit’s proxy)'],
    observations: {
      ordered: {
        action_id: ordered.action.id,
        kinds: ordered.chunks.map((chunk) => chunk.kind),
        sequences: ordered.chunks.map((chunk) => chunk.sequence),
        first_before_terminal_event_sent: firstBeforeTerminal ?? null,
        returned_while_first_chunk_held: settledWhileFirstHeld,
        max_chunks_with_consumer: maxInFlight,
      },
      truncated: {
        action_id: truncated.action.id,
        code: truncated.result.error?.code ?? null,
        events: output?.events.length ?? null,
        kinds: truncated.chunks.map((chunk) => chunk.kind),
      },
    },
    detail: 'chunks observed through the runtime-side onChunk publisher; the provider stream paced by the recording proxy',
  };
}

/**
 * run_events through a proxy that holds back the run's terminal event. The first chunk must reach
 * the consumer before the connector is sent that event (the connector streams rather than reading
 * the whole stream first); the consumer then keeps it until the whole stream went out and
 * FIRST_CHUNK_HOLD_MS more, during which a connector that waits for its consumer passes on no
 * other chunk and does not return. Later chunks are held CONSUMER_DELAY_MS each.
 */
async function readHeld(h: Harness, connector: HermesConnector, runId: string): Promise<HeldRead> {
  const hold = h.proxy.holdEventStream();
  const boundMs = Math.min(h.provider.stepTimeoutMs / 4, HOLD_BOUND_MS);
  const read: Omit<HeldRead, 'invocation'> = { firstBeforeTerminal: undefined, settledWhileFirstHeld: false, maxInFlight: 0 };
  let settled = false;
  let inFlight = 0;
  let firstChunkSeen = () => {};
  const firstChunk = new Promise<void>((resolve) => (firstChunkSeen = resolve));
  const pending = h
    .readEvents(connector, runId, {
      onChunk: async () => {
        read.maxInFlight = Math.max(read.maxInFlight, ++inFlight);
        if (read.firstBeforeTerminal === undefined) {
          read.firstBeforeTerminal = !hold.terminalSent;
          firstChunkSeen();
          hold.release();
          await Promise.race([hold.delivered, h.clock.sleep(boundMs)]);
          await h.clock.sleep(FIRST_CHUNK_HOLD_MS);
          read.settledWhileFirstHeld = settled;
        } else {
          await h.clock.sleep(CONSUMER_DELAY_MS);
        }
        inFlight--;
      },
    })
    .finally(() => {
      settled = true;
    });
  // A connector that publishes only once it has read everything gets the terminal event after the bound: the hold cannot deadlock it.
  await Promise.race([hold.terminalHeld.then(() => Promise.race([firstChunk, h.clock.sleep(boundMs)])), pending]);
  hold.release();
  return { invocation: await pending, ...read };
}
