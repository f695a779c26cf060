/**
 * Many jobs at once: every call the bridge makes listens to the bridge's own shutdown signal while
 * in flight, so a dozen concurrent jobs must not trip Node's MaxListenersExceededWarning on it.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { acceptedFinals, bridgeEnvFactory, callTool, newSessionId, scripts } from '../helpers/bridge-env.js';

const startEnv = bridgeEnvFactory();
const warnings: Error[] = [];
const onWarning = (warning: Error) => void warnings.push(warning);

beforeEach(() => {
  warnings.length = 0;
  process.on('warning', onWarning);
});
afterEach(() => {
  process.off('warning', onWarning);
});

describe('concurrent jobs', () => {
  it('12 jobs in flight at once: each posts one final result, and no MaxListenersExceededWarning is emitted', async () => {
    const { herm, bridge } = await startEnv({ hermes: { maxConcurrentRuns: 0 } });
    const sessionId = newSessionId();
    const uses = Array.from({ length: 12 }, (_, index) =>
      callTool(herm, sessionId, { prompt: `Render ${index}`, sim_script: scripts.held(200, `Rendered ${index}.`) }),
    );
    await Promise.all(uses.map((use) => bridge.handleEvent(sessionId, use)));
    await bridge.idle();
    // Warnings are emitted on the next tick.
    await new Promise((resolve) => setImmediate(resolve));

    for (const [index, use] of uses.entries()) {
      expect(acceptedFinals(herm, sessionId, use.tool_use_id)).toMatchObject([
        { status: 'completed', content: [{ type: 'text', text: `Rendered ${index}.` }] },
      ]);
    }
    expect(warnings.filter((warning) => warning.name === 'MaxListenersExceededWarning').map((warning) => warning.message)).toEqual([]);
  });
});
