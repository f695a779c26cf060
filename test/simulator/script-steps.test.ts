import { afterEach, describe, expect, it } from 'vitest';
import { call, closeSims, dataFrames, scripted, startRun, startSim, statusOf, subscribe, waitForStatus } from './support.js';

afterEach(closeSims);

describe('script steps', () => {
  it('cut destroys the current subscriber socket without a terminal chunk; the run goes on', async () => {
    const sim = await startSim({ streamLookupMs: 10 });
    const runId = await startRun(
      sim,
      scripted([
        { type: 'approval', command: 'hold' },
        { type: 'delta', text: 'before' },
        { type: 'cut' },
        { type: 'delta', text: 'after' },
        { type: 'complete', output: 'done' },
      ]),
    );
    const events = await subscribe(sim, runId);
    await events.waitForText('"approval.request"');
    await call(sim, 'POST', `/v1/runs/${runId}/approval`, { body: '{"choice": "once"}' });
    expect(await events.finished).toBe('error');
    expect(events.text()).toContain('"delta": "before"');
    expect(events.text()).not.toContain('"after"');
    expect(events.text()).not.toContain(': stream closed');
    await waitForStatus(sim, runId, 'completed');
    expect((await call(sim, 'GET', `/v1/runs/${runId}/events`)).status).toBe(404);
  });

  it('cut with no subscriber does nothing', async () => {
    const sim = await startSim();
    const runId = await startRun(sim, scripted([{ type: 'cut' }, { type: 'delta', text: 'kept' }]));
    await waitForStatus(sim, runId, 'completed');
    const events = await subscribe(sim, runId);
    expect(await events.finished).toBe('end');
    expect(events.text()).toContain('"delta": "kept"');
  });

  it('raw writes bytes verbatim, queued for the next subscriber when nobody listens', async () => {
    const sim = await startSim();
    const runId = await startRun(sim, {
      input: 'x',
      sim_script: [
        { type: 'raw', data: 'id: 7\ndata: {"event": "message.delta", "delta": "\\u00e9"}\n\n' },
        { type: 'raw', data: 'data: broken json\n\n' },
        { type: 'complete', output: 'ok' },
      ],
    });
    const events = await subscribe(sim, runId);
    await events.finished;
    expect(
      events.text().startsWith('id: 7\ndata: {"event": "message.delta", "delta": "\\u00e9"}\n\ndata: broken json\n\ndata: {"event": "run.completed"'),
    ).toBe(true);
    expect(sim.run(runId)?.events.map((e) => e['event'])).toEqual(['run.completed']);
  });

  it('raw accepts bytes through options.script', async () => {
    const sim = await startSim({
      script: () => [
        { type: 'raw', data: new TextEncoder().encode('data: {"x": 1}\r\n\r\n') },
        { type: 'fail', error: 'boom' },
      ],
    });
    const runId = await startRun(sim);
    const events = await subscribe(sim, runId);
    await events.finished;
    expect(events.text().startsWith('data: {"x": 1}\r\n\r\ndata: {"event": "run.failed"')).toBe(true);
  });

  it('fail ends the run with run.failed and an error field in the status', async () => {
    const sim = await startSim();
    const runId = await startRun(
      sim,
      scripted([
        { type: 'delta', text: 'a' },
        { type: 'fail', error: 'Provider returned 401' },
        { type: 'delta', text: 'never' },
      ]),
    );
    await waitForStatus(sim, runId, 'failed');
    const status = await statusOf(sim, runId);
    expect(status).toMatchObject({ status: 'failed', last_event: 'run.failed', error: 'Provider returned 401' });
    expect(Object.keys(status).at(-1)).toBe('error');
    expect(sim.run(runId)?.events.map((e) => e['event'])).toEqual(['message.delta', 'run.failed']);
    expect(sim.run(runId)?.events.at(-1)).toMatchObject({ error: 'Provider returned 401' });
  });

  it('emits tool and reasoning events with their wire fields', async () => {
    const sim = await startSim();
    const runId = await startRun(
      sim,
      scripted([
        { type: 'reasoning', text: 'thinking' },
        { type: 'tool', tool: 'web_search', preview: 'query', duration: 1, error: false },
        { type: 'tool', tool: 'read_file' },
      ]),
    );
    const events = await subscribe(sim, runId);
    await events.finished;
    const text = events.text();
    expect(text).toMatch(/"event": "reasoning\.available", "run_id": "run_[0-9a-f]{32}", "timestamp": \d+\.\d+, "text": "thinking"\}/);
    expect(text).toMatch(/"tool": "web_search", "preview": "query"\}/);
    expect(text).toMatch(/"tool": "web_search", "duration": 1\.0, "error": false\}/);
    expect(text).toMatch(/"tool": "read_file", "preview": null\}/);
    const frames = dataFrames(text);
    expect(frames.at(-1)).toMatchObject({ event: 'run.completed', output: '' });
  });

  it('defaults: Hello world, integer usage, session_id = run_id, model = modelName', async () => {
    const sim = await startSim({ modelName: 'my-hermes' });
    const runId = await startRun(sim, { input: [{ role: 'user', content: 'hi there' }] });
    await waitForStatus(sim, runId, 'completed');
    const status = await statusOf(sim, runId);
    expect(status).toMatchObject({ session_id: runId, model: 'my-hermes', output: 'Hello world' });
    const usage = status['usage'] as Record<string, number>;
    expect(Number.isInteger(usage['input_tokens']) && Number.isInteger(usage['output_tokens'])).toBe(true);
    expect(usage['total_tokens']).toBe((usage['input_tokens'] ?? 0) + (usage['output_tokens'] ?? 0));
  });

  it('echoes body.model even when it is null', async () => {
    const sim = await startSim();
    const runId = await startRun(sim, { input: 'hi', model: null });
    const answer = await call(sim, 'GET', `/v1/runs/${runId}`);
    expect(answer.text).toContain('"model": null, "last_event": ');
  });

  it('picks the approval flow when the last message mentions rm -rf', async () => {
    const sim = await startSim();
    const runId = await startRun(sim, {
      input: [
        { role: 'user', content: 'old' },
        { role: 'user', content: [{ type: 'text', text: 'please run rm -rf ./dist' }] },
      ],
    });
    await waitForStatus(sim, runId, 'waiting_for_approval');
    expect(sim.run(runId)?.events.at(-1)).toMatchObject({ event: 'approval.request', command: 'rm -rf ./dist', pattern_key: 'recursive delete' });
  });
});
