import { AjvJsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/ajv';
import { describe, expect, it } from 'vitest';
import { createHermesConnector, type AipActionResult } from '../../src/index.js';
import { buildTools, checkedToolNames, McpSetupError } from '../../src/mcp/tools.js';
import { toolResult } from '../../src/mcp/results.js';

const endpoint = (id: string) => ({ id, baseUrl: 'http://127.0.0.1:1', apiKey: 'k' });
const toolsFor = (...ids: string[]) => buildTools(createHermesConnector({ endpoints: ids.map(endpoint) }).capabilities());

describe('MCP tool names', () => {
  it('names every capability hermes_<endpoint>_<operation>, within MCP limits', () => {
    const longest = 'e'.repeat(108);
    const names = toolsFor('prod', 'eu-west_2', longest).map((tool) => tool.name);
    expect(names.slice(0, 5)).toEqual([
      'hermes_prod_run_start',
      'hermes_prod_run_status',
      'hermes_prod_run_events',
      'hermes_prod_run_approval',
      'hermes_prod_run_stop',
    ]);
    expect(names).toContain('hermes_eu-west_2_run_status');
    expect(Math.max(...names.map((name) => name.length))).toBe(128);
  });

  it('refuses an endpoint whose tool names would exceed 128 characters', () => {
    expect(() => toolsFor('e'.repeat(109))).toThrow(McpSetupError);
    expect(() => toolsFor('e'.repeat(109))).toThrow(/129 characters/);
  });

  it('refuses two pairs that would share one name', () => {
    expect(() =>
      checkedToolNames([
        { endpointId: 'a_b', operation: 'c' },
        { endpointId: 'a', operation: 'b_c' },
      ]),
    ).toThrow(/hermes_a_b_c would stand for both a_b:c and a:b_c/);
  });
});

describe('MCP tool schemas', () => {
  // What the SDK client does with a tool's outputSchema: compile it with draft-07 Ajv, every tool in one instance.
  const validator = new AjvJsonSchemaValidator();
  const tools = toolsFor('one', 'two');

  it('compile in one client validator for every endpoint, and admit both the output and the typed error', () => {
    const status = tools.find((tool) => tool.name === 'hermes_two_run_status');
    if (!status) throw new Error('no run_status tool');
    for (const tool of tools) validator.getValidator(tool.definition.outputSchema);
    const validate = validator.getValidator(status.definition.outputSchema);
    const completed = toolResult(status, { action_id: 'a', status: 'completed', output: { run_id: 'run_1', status: 'running' } });
    expect(validate(completed.structuredContent).valid).toBe(true);
    const failed = toolResult(status, {
      action_id: 'a',
      status: 'failed',
      error: { code: 'connector.hermes_agent.not_found', message: 'gone', category: 'permanent', retryable: false, details: { uncertain_outcome: false } },
    });
    expect(failed.isError).toBe(true);
    expect(validate(failed.structuredContent).valid).toBe(true);
    expect(validate({ run_id: 'run_1' }).valid).toBe(false);
  });

  it('carry every other status as the connector returned it: its output, its error or none, never an invented one', () => {
    const events = tools.find((tool) => tool.name === 'hermes_two_run_events');
    if (!events) throw new Error('no run_events tool');
    const validate = validator.getValidator(events.definition.outputSchema);
    const output = { endpoint_id: 'two', operation: 'run_events', http_status: 200, events: [], text: 'so far', terminal: false };
    const aborted = {
      code: 'connector.hermes_agent.cancelled',
      message: 'cancelled by the caller',
      category: 'temporary' as const,
      retryable: false,
      details: { uncertain_outcome: false },
    };
    const cases: Array<{ result: AipActionResult; isError: boolean }> = [
      { result: { action_id: 'a', status: 'pending_approval', output }, isError: false },
      { result: { action_id: 'a', status: 'requires_human' }, isError: false },
      { result: { action_id: 'a', status: 'cancelled', output }, isError: false },
      { result: { action_id: 'a', status: 'cancelled', output, error: aborted }, isError: true },
      { result: { action_id: 'a', status: 'failed', output, error: { ...aborted, code: 'connector.hermes_agent.stream_failed' } }, isError: true },
      { result: { action_id: 'a', status: 'failed' }, isError: true },
    ];
    for (const { result, isError } of cases) {
      const mcp = toolResult(events, result);
      const expected = { status: result.status, action_id: 'a', ...(result.output ? { output } : {}), ...(result.error ? { error: result.error } : {}) };
      expect(mcp.structuredContent, result.status).toEqual(expected);
      expect(Boolean(mcp.isError), result.status).toBe(isError);
      expect(validate(mcp.structuredContent).valid, result.status).toBe(true);
      const text = (mcp.content[0] as { text: string }).text;
      expect(text).toContain(result.status);
      expect(text).not.toContain('internal');
      if (result.error) expect(text).toContain(result.error.code);
      if (result.output) expect(text).toContain('Text: so far');
    }
  });

  it('check their inputs the way the contract does, with idempotency_key only where the contract requires a key', () => {
    const approval = tools.find((tool) => tool.operation === 'run_approval');
    if (!approval) throw new Error('no run_approval tool');
    const validate = validator.getValidator(approval.definition.inputSchema);
    expect(validate({ run_id: 'run_1', choice: 'once', idempotency_key: 'k' }).valid).toBe(true);
    expect(validate({ run_id: 'run_1', choice: 'later' }).valid).toBe(false);
    expect(validate({ run_id: '..', choice: 'once' }).valid).toBe(false);
    expect(tools.filter((tool) => 'idempotency_key' in (tool.definition.inputSchema['properties'] as object)).map((tool) => tool.operation)).toEqual([
      'run_start',
      'run_approval',
      'run_stop',
      'run_start',
      'run_approval',
      'run_stop',
    ]);
  });
});
