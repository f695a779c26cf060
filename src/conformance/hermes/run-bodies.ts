import { randomBytes } from 'node:crypto';
import { DEFAULT_HARMLESS_PROMPT, defaultApprovalPrompt } from '../../cli/qualify/command.js';
import { simulatorScripts } from '../../cli/qualify/simulator-scripts.js';
import type { RunBodies } from './harness.js';

/** The qualification's prompts against a live Hermes; its scripted runs against the simulator. */
export function runBodies(simulated: boolean): RunBodies {
  const approvalPrompt = defaultApprovalPrompt(`rm -rf ./aip-conformance-scratch-${randomBytes(6).toString('hex')}`);
  if (!simulated) {
    return {
      harmless: () => ({ input: DEFAULT_HARMLESS_PROMPT }),
      approval: (sessionId) => ({ input: approvalPrompt, session_id: sessionId }),
      // A live Hermes has no "long" prompt: a run held at its approval is what stays active.
      long: () => ({ input: approvalPrompt }),
    };
  }
  const scripts = simulatorScripts('rm -rf ./aip-conformance-scratch');
  return {
    harmless: () => ({ input: DEFAULT_HARMLESS_PROMPT, sim_script: scripts.harmless }),
    approval: (sessionId) => ({ input: approvalPrompt, session_id: sessionId, sim_script: scripts.approval }),
    long: () => ({ input: DEFAULT_HARMLESS_PROMPT, sim_script: scripts.long }),
  };
}
