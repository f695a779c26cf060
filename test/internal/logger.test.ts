import { afterEach, expect, test } from 'vitest';
import { connectorLogger, invocationLogger } from '../../src/internal/logger.js';
import { grantFor, nextId, script, startHarness, API_KEY, type Harness } from '../helpers/harness.js';
import { captureLogger } from '../helpers/capture-logger.js';

let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

test('every invocation logs through its own child with action, capability and endpoint ids, and never the key', async () => {
  const capture = captureLogger();
  h = await startHarness({ connector: { logger: capture.logger }, simulator: { stepDelayMs: 2 } });
  const runId = await h.startRun({ input: 'hello', sim_script: script.quick() });
  await h.invoke({ capability_id: h.cap('run_events'), input: { run_id: runId } });
  const stopInput = { run_id: runId };
  await h.invoke({ capability_id: h.cap('run_stop'), input: stopInput, idempotency_key: nextId() }, { approval: grantFor(stopInput) });
  await h.invoke({ capability_id: h.cap('run_status'), input: { run_id: 'missing' } });

  const finished = capture.lines.filter((line) => line.msg === 'hermes action finished');
  expect(finished).toHaveLength(4);
  for (const line of finished) {
    expect(line).toMatchObject({ component: 'aip-connector-hermes-agent', endpoint_id: 'local' });
    expect(String(line.action_id)).toMatch(/^act_/);
    expect(String(line.capability_id)).toMatch(/^cap:hermes_agent:local:run_/);
  }
  expect(finished.map((line) => line.code)).toEqual([undefined, undefined, 'connector.hermes_agent.not_found', 'connector.hermes_agent.not_found']);
  expect(capture.lines.some((line) => line.msg === 'hermes request' && line.method === 'POST' && line.path === '/v1/runs')).toBe(true);
  expect(capture.raw()).not.toContain(API_KEY);
});

test('redaction covers credential fields a host logs through the connector logger', () => {
  const capture = captureLogger();
  connectorLogger(capture.logger).info({ headers: { authorization: `Bearer ${API_KEY}` }, apiKey: API_KEY }, 'probe');
  expect(capture.raw()).not.toContain(API_KEY);
  expect(capture.lines.at(-1)).toMatchObject({ headers: { authorization: '[REDACTED]' }, apiKey: '[REDACTED]' });
});

test('without a host logger the connector logs nothing', () => {
  const logger = connectorLogger(undefined);
  expect(logger.level).toBe('silent');
  expect(invocationLogger(logger, 'act_a', 'cap:hermes_agent:local:run_status', 'local')).toBe(logger);
});
