/**
 * Session and tool-use ids are stored in the bridge's job records as given: ids a ledger cannot hold
 * exactly (a lone surrogate, a NUL) are not tool calls the bridge can track, so such an event is
 * ignored like any other malformed one, on every backend alike: no job, no run. A bridge whose own
 * tenant id is such text is refused at construction.
 */
import { describe, expect, it } from 'vitest';
import { ConnectorConfigError } from 'aip-connector-hermes-agent';
import { LEDGER_BACKENDS } from '../helpers/ledgers.js';
import { bridgeEnvFactory, bridgeFor, newSessionId } from '../helpers/bridge-env.js';

const startEnv = bridgeEnvFactory();

describe.each(LEDGER_BACKENDS)('Herm events with ids a ledger cannot store ($name ledger)', (backend) => {
  it.each([
    ['a lone surrogate', '\ud800'],
    ['a NUL', '\u0000'],
  ])('%s in the session id or the tool-use id: ignored, nothing stored or started', async (_, bad) => {
    const { ledger } = await backend.create();
    const env = await startEnv({ ledger });
    const use = (toolUseId: string) => ({ type: 'agent.custom_tool_use', tool_use_id: toolUseId, name: 'hermes_run', input: { prompt: 'Render' } });
    const session = newSessionId();
    expect(await env.bridge.handleEvent(`${session}${bad}`, use('toolu_1'))).toBeNull();
    expect(await env.bridge.handleEvent(session, use(`toolu_${bad}`))).toBeNull();
    await env.bridge.idle();
    expect(await ledger.unfinishedJobs()).toEqual([]);
    expect(env.hermes.requests).toHaveLength(0);
    expect(env.herm.requests).toHaveLength(0);
  });
});

it('a bridge whose tenant id a ledger cannot store is refused at construction', async () => {
  const env = await startEnv();
  expect(() => bridgeFor(env.herm, env.connector, env.ledger, { context: { tenantId: 'tenant\u0000' } })).toThrow(ConnectorConfigError);
});
