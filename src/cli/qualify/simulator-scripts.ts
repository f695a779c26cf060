import type { SimulatorScripts } from './session.js';

/** The scripted runs used against the embedded simulator (`body.sim_script`). */
export function simulatorScripts(scratchCommand: string): SimulatorScripts {
  return {
    harmless: [
      { type: 'reasoning', text: 'A one-word answer is requested.' },
      { type: 'delta', text: 'rea' },
      { type: 'delta', text: 'dy' },
      { type: 'complete', output: 'ready' },
    ],
    approval: [
      { type: 'delta', text: 'Removing the scratch folder.' },
      { type: 'approval', command: scratchCommand, pattern_key: 'recursive delete', description: 'recursive delete' },
      { type: 'tool', tool: 'terminal' },
      { type: 'delta', text: ' Done.' },
      { type: 'complete', output: 'Removing the scratch folder. Done.' },
    ],
    // Events after the first, so that a consumer cut after it has events to miss.
    long: [
      { type: 'delta', text: 'Working' },
      { type: 'delta', text: ' on' },
      { type: 'delta', text: ' it' },
      { type: 'sleep', ms: 120_000 },
      { type: 'complete', output: 'Working late' },
    ],
  };
}
