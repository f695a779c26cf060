import { describe, expect, it } from 'vitest';
import { harnessFactory, nextId } from '../helpers/harness.js';

const harness = harnessFactory();

describe('run_events abort between frames of one network read', () => {
  it('an abort from onChunk stops publishing at once, even when the rest of the stream arrived in the same read', async () => {
    const h = await harness();
    const frames = ['message.delta', 'message.delta', 'run.completed']
      .map((event, index) => `data: {"event": "${event}", "run_id": "r", "timestamp": ${index}.5, "delta": "x", "output": "x"}\n\n`)
      .join('');
    const runId = await h.startRun({
      input: 'one write',
      sim_script: [
        { type: 'raw', data: frames },
        { type: 'sleep', ms: 60_000 },
      ],
    });
    const abort = new AbortController();
    const result = await h.invoke(
      { id: nextId(), capability_id: h.cap('run_events'), input: { run_id: runId } },
      { signal: abort.signal, onChunk: () => abort.abort() },
    );
    expect(result.status).toBe('cancelled');
    expect(result.error?.code).toBe('connector.hermes_agent.cancelled');
    const chunks = h.chunks.get(result.action_id) ?? [];
    expect(chunks.map((chunk) => chunk.kind)).toEqual(['data', 'error']);
  });
});
