import { describe, expect, it } from 'vitest';
import { startHermSimulator } from '../../src/simulator/index.js';
import { closeAll, KEY, start, result, post, only, openStream } from './herm-support.js';
import { waitFor } from './support.js';

function openNetworkHandles(): string[] {
  return process.getActiveResourcesInfo().filter((kind) => kind.startsWith('TCP'));
}

describe('Herm simulator: lifecycle', () => {
  it('listens on 127.0.0.1 and an ephemeral port by default', async () => {
    const sim = await start();
    expect(sim.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(Number(new URL(sim.url).port)).toBeGreaterThan(0);
  });

  it('fails fast when the port is taken', async () => {
    const sim = await start();
    await expect(startHermSimulator({ apiKey: KEY, port: Number(new URL(sim.url).port) })).rejects.toThrow();
  });

  it('sends a keepalive comment on idle streams', async () => {
    const sim = await start({ keepaliveMs: 10 });
    const stream = await openStream(sim, 'session_1');
    await waitFor(() => stream.text().includes(': ping\n\n'), 'a keepalive');
    expect(stream.frames()).toEqual([]);
    stream.close();
  });

  it('close() ends open streams, cancels pending-call timers and leaves no network handle behind', async () => {
    const sim = await start({ keepaliveMs: 10 });
    const stream = await openStream(sim, 'session_1');
    sim.emitToolUse('session_1', { name: 'render', input: {} });
    only(await post(sim, 'session_1', [result('custom_toolu_x', 'running')]));
    await waitFor(() => stream.frames().length === 2, 'two frames');

    await sim.close();
    expect(['end', 'error']).toContain(await stream.finished);
    await sim.close(); // idempotent
    await expect(post(sim, 'session_1', [result('custom_toolu_y', 'running')])).rejects.toThrow();
    // Every other simulator of this file is closed too, so no TCP handle may stay.
    await closeAll();
    await waitFor(() => openNetworkHandles().length === 0, `no TCP handles (${openNetworkHandles().join(', ')})`);
  });

  it('inspection stays available after close()', async () => {
    const sim = await start();
    const use = sim.emitToolUse('session_1', { name: 'render', input: {} });
    const event = only(await post(sim, 'session_1', [result(use.tool_use_id, 'running')]));
    await sim.close();
    expect(sim.history('session_1')).toEqual([event]);
    expect(sim.toolCall('session_1', use.tool_use_id)?.state).toBe('running');
  });
});
