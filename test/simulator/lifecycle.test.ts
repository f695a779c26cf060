import { afterEach, describe, expect, it } from 'vitest';
import { startHermesSimulator } from '../../src/simulator/index.js';
import { API_KEY, call, closeSims, scripted, startRun, startSim, subscribe, waitFor, waitForStatus } from './support.js';

afterEach(closeSims);

function openNetworkHandles(): string[] {
  return process.getActiveResourcesInfo().filter((kind) => kind.startsWith('TCP'));
}

describe('simulator lifecycle', () => {
  it('exposes url, port and profile', async () => {
    const sim = await startSim({ profile: 'later' });
    expect(sim.url).toBe(`http://127.0.0.1:${sim.port}`);
    expect(sim.port).toBeGreaterThan(0);
    expect(sim.profile).toBe('later');
    expect((await startSim()).profile).toBe('pin');
  });

  it('refuses to start without an API key', async () => {
    await expect(startHermesSimulator({ apiKey: '' })).rejects.toThrow(/apiKey/);
  });

  it('fails fast when the port is taken', async () => {
    const sim = await startSim();
    await expect(startHermesSimulator({ apiKey: API_KEY, port: sim.port })).rejects.toThrow();
  });

  it('close() ends open streams, pending approvals, sleeps and keepalives, and leaves no handle behind', async () => {
    const sim = await startHermesSimulator({ apiKey: API_KEY, keepaliveMs: 10 });
    const waiting = await startRun(sim, scripted([{ type: 'approval', command: 'x' }]));
    const sleeping = await startRun(sim, scripted([{ type: 'sleep', ms: 600_000 }]));
    await waitForStatus(sim, waiting, 'waiting_for_approval');
    await waitForStatus(sim, sleeping, 'running');
    const events = await subscribe(sim, sleeping);
    await events.waitForText(': keepalive');
    const lookup = call(sim, 'GET', '/v1/runs/run_missing/events').catch(() => 'closed');

    await sim.close();
    expect(await events.finished).toBe('error');
    await lookup;
    await sim.close(); // idempotent
    // Every other simulator of this file is closed too, so no TCP handle may stay.
    await waitFor(() => openNetworkHandles().length === 0, `no TCP handles (${openNetworkHandles().join(', ')})`);
    expect(sim.run(waiting)?.status).toBe('waiting_for_approval');
  });
});
