/**
 * The `dispatcher` option with the dispatchers users inject: undici's MockAgent (the
 * recommended way to test a host without a server) and a dispatcher composed with an
 * interceptor. The JSON operations dispatch through the handler interface, so these check
 * that statuses, bodies, provider error codes and transport errors come through them intact.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { MockAgent, type Dispatcher } from 'undici';
import { createHermesConnector, type AipActionResult, type HermesConnector } from 'aip-connector-hermes-agent';

const ORIGIN = 'http://hermes.mock.test:8642';
const KEY = 'hk_injected_key_0123456789abcdef';
const RUN_ID = `run_${'b'.repeat(32)}`;
const PREFIX = 'connector.hermes_agent.';
const STATUS = {
  object: 'hermes.run',
  run_id: RUN_ID,
  status: 'running',
  created_at: 1796032842.0,
  updated_at: 1796032843.5,
  session_id: 's',
  model: 'hermes-agent',
};

let connector: HermesConnector | undefined;
let counter = 0;

afterEach(async () => {
  await connector?.close();
  connector = undefined;
});

function connect(dispatcher: Dispatcher): HermesConnector {
  connector = createHermesConnector({ endpoints: [{ id: 'mocked', baseUrl: ORIGIN, apiKey: KEY }], dispatcher });
  return connector;
}

function mockAgent(): MockAgent {
  const agent = new MockAgent();
  agent.disableNetConnect();
  return agent;
}

const status = (c: HermesConnector) =>
  c.invoke({ id: `act_mock_${++counter}`, capability_id: 'cap:hermes_agent:mocked:run_status', input: { run_id: RUN_ID } });

function expectCode(result: AipActionResult, code: string): void {
  expect(result.status).toBe('failed');
  expect(result.error?.code).toBe(`${PREFIX}${code}`);
}

describe('an injected MockAgent', () => {
  it('answers run_status with the mocked JSON, sent with the endpoint credential', async () => {
    const agent = mockAgent();
    agent
      .get(ORIGIN)
      .intercept({ path: `/v1/runs/${RUN_ID}`, method: 'GET', headers: { authorization: `Bearer ${KEY}`, accept: 'application/json' } })
      .reply(200, STATUS, { headers: { 'content-type': 'application/json' } });
    const result = await status(connect(agent));
    expect(result.status).toBe('completed');
    expect(result.output).toEqual(STATUS);
    expect(result.receipt?.http_status).toBe(200);
    agent.assertNoPendingInterceptors();
  });

  it("sends run_start's body as JSON and returns the accepted run", async () => {
    const agent = mockAgent();
    const bodies: unknown[] = [];
    agent
      .get(ORIGIN)
      .intercept({ path: '/v1/runs', method: 'POST', body: (body) => (bodies.push(JSON.parse(body)), true) })
      .reply(202, { run_id: RUN_ID, status: 'started' }, { headers: { 'content-type': 'application/json' } });
    const result = await connect(agent).invoke({
      id: `act_mock_${++counter}`,
      capability_id: 'cap:hermes_agent:mocked:run_start',
      input: { body: { input: 'Check the disk.' } },
      idempotency_key: `key-mock-${counter}`,
    });
    expect(result.status).toBe('completed');
    expect(result.output).toEqual({ run_id: RUN_ID, status: 'started' });
    // MockAgent may run a body matcher more than once per request; every run saw the same body.
    expect(bodies.length).toBeGreaterThan(0);
    for (const body of bodies) expect(body).toEqual({ input: 'Check the disk.' });
  });

  it("maps a mocked 404 with Hermes' error body to not_found with the provider code", async () => {
    const agent = mockAgent();
    agent
      .get(ORIGIN)
      .intercept({ path: `/v1/runs/${RUN_ID}`, method: 'GET' })
      .reply(
        404,
        { error: { message: `Run not found: ${RUN_ID}`, type: 'invalid_request_error', code: 'run_not_found' } },
        { headers: { 'content-type': 'application/json' } },
      );
    const result = await status(connect(agent));
    expectCode(result, 'not_found');
    expect(result.error?.details?.provider_code).toBe('run_not_found');
    expect(result.receipt?.http_status).toBe(404);
  });

  it('refuses a mocked 200 that is not JSON as invalid_response', async () => {
    const agent = mockAgent();
    agent
      .get(ORIGIN)
      .intercept({ path: `/v1/runs/${RUN_ID}`, method: 'GET' })
      .reply(200, '<html></html>', { headers: { 'content-type': 'text/html' } });
    expectCode(await status(connect(agent)), 'invalid_response');
  });

  it('reports a mocked connection reset as transport with its code', async () => {
    const agent = mockAgent();
    agent
      .get(ORIGIN)
      .intercept({ path: `/v1/runs/${RUN_ID}`, method: 'GET' })
      .replyWithError(Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' }));
    const result = await status(connect(agent));
    expectCode(result, 'transport');
    expect(result.error?.details?.transport_code).toBe('ECONNRESET');
  });

  it('reports a request no interceptor matches (net connect disabled) as a transport failure, not a hang', async () => {
    const agent = mockAgent();
    const result = await status(connect(agent));
    expectCode(result, 'transport');
    expect(result.error?.details?.transport_code).toBe('UND_MOCK_ERR_MOCK_NOT_MATCHED');
  });
});

describe('a dispatcher that throws from dispatch()', () => {
  it('gives a transport failure, not an internal one or a rejection', async () => {
    const throwing = {
      request: () => Promise.reject(new Error('unused')),
      dispatch: () => {
        throw Object.assign(new Error('no sockets'), { code: 'UND_ERR_CLOSED' });
      },
    };
    const result = await status(connect(throwing as unknown as Dispatcher));
    expectCode(result, 'transport');
    expect(result.error?.details?.transport_code).toBe('UND_ERR_CLOSED');
    expect(result.error?.retryable).toBe(true);
  });
});

describe('a dispatcher composed with an interceptor', () => {
  it('sees every request the connector makes and passes the answer through', async () => {
    const mock = mockAgent();
    mock
      .get(ORIGIN)
      .intercept({ path: `/v1/runs/${RUN_ID}`, method: 'GET' })
      .reply(200, STATUS, { headers: { 'content-type': 'application/json' } })
      .times(2);
    const seen: string[] = [];
    const composed = mock.compose((dispatch) => (options, handler) => {
      seen.push(`${options.method} ${options.path}`);
      return dispatch(options, handler);
    });
    const c = connect(composed);
    expect((await status(c)).status).toBe('completed');
    expect((await status(c)).output).toEqual(STATUS);
    expect(seen).toEqual([`GET /v1/runs/${RUN_ID}`, `GET /v1/runs/${RUN_ID}`]);
  });
});
