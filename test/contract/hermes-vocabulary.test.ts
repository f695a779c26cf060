/** The connector's Hermes vocabulary and the simulator's independent copy say the same thing. */
import { describe, expect, it } from 'vitest';
import { TERMINAL_EVENTS, TERMINAL_STATUSES, statusOfTerminalEvent } from '../../src/contract/hermes-vocabulary.js';
import { TERMINAL_EVENTS as SIMULATOR_TERMINAL_EVENTS, TERMINAL_STATUSES as SIMULATOR_TERMINAL_STATUSES } from '../../src/simulator/hermes/run.js';

describe('Hermes vocabulary', () => {
  it('terminal statuses and events equal the simulator’s', () => {
    expect([...TERMINAL_STATUSES].sort()).toEqual([...SIMULATOR_TERMINAL_STATUSES].sort());
    expect([...TERMINAL_EVENTS].sort()).toEqual([...SIMULATOR_TERMINAL_EVENTS].sort());
  });

  it('each terminal event stands for a terminal status; other events for none', () => {
    for (const event of TERMINAL_EVENTS) expect(TERMINAL_STATUSES.has(statusOfTerminalEvent(event) as string), event).toBe(true);
    for (const event of ['message.delta', 'approval.request', 'toString', '__proto__']) expect(statusOfTerminalEvent(event)).toBeUndefined();
  });
});
