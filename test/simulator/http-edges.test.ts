import { Readable } from 'node:stream';
import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { API_KEY, AUTH, call, closeSims, rawExchange, startSim } from './support.js';

afterEach(closeSims);

const SECURITY = {
  'content-security-policy': "default-src 'none'; frame-ancestors 'none'",
  'permissions-policy': 'camera=(), microphone=(), geolocation=()',
  'strict-transport-security': 'max-age=31536000; includeSubDomains',
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
  'x-xss-protection': '0',
  'referrer-policy': 'no-referrer',
};

function error(message: string, code: string | null = null): string {
  return `{"error": {"message": ${JSON.stringify(message)}, "type": "invalid_request_error", "param": null, "code": ${code === null ? 'null' : `"${code}"`}}}`;
}

describe('auth', () => {
  it('requires exactly "Bearer " then the key, on every route', async () => {
    const sim = await startSim();
    const cases = [undefined, `bearer ${API_KEY}`, `Bearer  ${API_KEY}x`, `Bearer ${API_KEY.slice(1)}`, 'Bearer héllo', `Basic ${API_KEY}`];
    for (const authorization of cases) {
      for (const [method, path] of [
        ['POST', '/v1/runs'],
        ['GET', '/v1/runs/x'],
        ['GET', '/v1/runs/x/events'],
        ['POST', '/v1/runs/x/stop'],
        ['POST', '/v1/runs/x/approval'],
      ] as const) {
        const headers: Record<string, string> = authorization === undefined ? {} : { authorization };
        const answer = await request(`${sim.url}${path}`, { method, headers, reset: true });
        expect(answer.statusCode).toBe(401);
        expect(await answer.body.text()).toBe('{"error": {"message": "Invalid API key", "type": "invalid_request_error", "code": "invalid_api_key"}}');
      }
    }
    const padded = await call(sim, 'GET', '/v1/runs/x', { headers: { authorization: `Bearer   ${API_KEY}  ` } });
    expect(padded.status).toBe(404);
  });

  it('does not crash on a non-ASCII token', async () => {
    const sim = await startSim();
    const answer = await rawExchange(sim.port, `GET /v1/runs/x HTTP/1.1\r\nHost: a\r\nConnection: close\r\nAuthorization: Bearer \xe9\xff\r\n\r\n`);
    expect(answer.statusLine).toBe('HTTP/1.1 401 Unauthorized');
  });
});

describe('POST /v1/runs validation', () => {
  it('answers each validation error with the documented message and code null', async () => {
    const sim = await startSim();
    const cases: Array<[string, string]> = [
      ['{"input": ""}', "Missing 'input' field"],
      ['{"input": []}', "Missing 'input' field"],
      ['{"input": null}', "Missing 'input' field"],
      ['{"input": 0}', "Missing 'input' field"],
      ['{"input": 42}', 'No user message found in input'],
      ['{"input": {"content": "x"}}', 'No user message found in input'],
      ['{"input": [{"role": "user", "content": ""}]}', 'No user message found in input'],
      ['{"input": [{"role": "user"}]}', 'No user message found in input'],
      ['{"input": "x", "conversation_history": "nope"}', "'conversation_history' must be an array of message objects"],
      [
        '{"input": "x", "conversation_history": [{"role": "user", "content": "a"}, {"role": "user"}]}',
        "conversation_history[1] must have 'role' and 'content' fields",
      ],
      ['{"input": "x", "conversation_history": ["text"]}', "conversation_history[0] must have 'role' and 'content' fields"],
      ['{nope', 'Invalid JSON'],
      ['', 'Invalid JSON'],
      ['\ufeff{"input": "x"}', 'Invalid JSON'],
    ];
    for (const [body, message] of cases) {
      const answer = await call(sim, 'POST', '/v1/runs', { body });
      expect([answer.status, answer.text]).toEqual([400, error(message)]);
    }
    expect(sim.startCount()).toBe(0);
    expect(sim.runs()).toEqual([]);
  });

  it('answers aiohttp plain-text 500 for a non-object JSON body or a non-object last message', async () => {
    const sim = await startSim();
    for (const body of ['[1, 2]', '"text"', 'null', '{"input": ["just a string"]}']) {
      const answer = await call(sim, 'POST', '/v1/runs', { body });
      expect(answer.status).toBe(500);
      expect(answer.headers['content-type']).toBe('text/plain; charset=utf-8');
      expect(answer.text).toBe('500 Internal Server Error\n\nServer got itself in trouble');
    }
    expect(sim.startCount()).toBe(0);
  });

  it('checks the session key header: trimmed, no CR/LF/NUL, at most 256 characters', async () => {
    const sim = await startSim();
    const tooLong = await call(sim, 'POST', '/v1/runs', { body: '{"input": "x"}', headers: { 'X-Hermes-Session-Key': 'k'.repeat(257) } });
    expect([tooLong.status, tooLong.text]).toEqual([400, '{"error": {"message": "Session key too long", "type": "invalid_request_error"}}']);
    const ok = await call(sim, 'POST', '/v1/runs', { body: '{"input": "x"}', headers: { 'X-Hermes-Session-Key': `  ${'k'.repeat(256)}  ` } });
    expect(ok.status).toBe(202);
    expect(ok.headers['x-hermes-session-key']).toBe('k'.repeat(256));
    const blank = await call(sim, 'POST', '/v1/runs', { body: '{"input": "x"}', headers: { 'X-Hermes-Session-Key': '   ' } });
    expect(blank.headers['x-hermes-session-key']).toBeUndefined();
  });

  it('answers an oversized chunked body with 400 Invalid JSON (the handler catches the limit before the middleware does)', async () => {
    const sim = await startSim();
    const big = Buffer.alloc(10_000_001, 0x20);
    const answer = await request(`${sim.url}/v1/runs`, {
      method: 'POST',
      reset: true,
      headers: { ...AUTH, 'content-type': 'application/json' },
      body: Readable.from([Buffer.from('{"input": "x"'), big, Buffer.from('}')]),
    });
    expect(answer.statusCode).toBe(400);
    expect(await answer.body.text()).toBe(error('Invalid JSON'));
    expect(answer.headers['x-frame-options']).toBe('DENY');
  });
});

describe('middleware and routing', () => {
  it('puts the security headers on what a route handler answers, errors included', async () => {
    const sim = await startSim();
    for (const answer of [
      await call(sim, 'GET', '/v1/runs/x'),
      await call(sim, 'POST', '/v1/runs', { body: '{}' }),
      await call(sim, 'GET', '/v1/runs/x', { headers: { authorization: 'x' } }),
      await call(sim, 'GET', '/health'),
    ]) {
      expect(answer.headers).toMatchObject(SECURITY);
    }
  });

  it('sends no security headers where the middleware never sees an answer: unknown routes, wrong methods, 413', async () => {
    const sim = await startSim();
    for (const answer of [await call(sim, 'GET', '/nowhere'), await call(sim, 'GET', '/v1/runs')]) {
      for (const name of Object.keys(SECURITY)) expect(answer.headers[name], name).toBeUndefined();
    }
    const declaredTooLarge = await rawExchange(sim.port, 'POST /v1/runs HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Length: 10000001\r\n\r\n');
    expect(declaredTooLarge.statusLine).toBe('HTTP/1.1 413 Payload Too Large');
    for (const name of Object.keys(SECURITY)) expect(declaredTooLarge.header(name), name).toBeUndefined();
  });

  it('answers unknown routes with aiohttp text and wrong methods with 405', async () => {
    const sim = await startSim();
    const missing = await call(sim, 'GET', '/v1/runs/x/nothing');
    expect([missing.status, missing.text, missing.headers['content-type']]).toEqual([404, '404: Not Found', 'text/plain; charset=utf-8']);
    expect((await call(sim, 'GET', '/v1/runs/')).status).toBe(404);
    const wrong = await call(sim, 'GET', '/v1/runs');
    expect([wrong.status, wrong.text, wrong.headers['allow']]).toEqual([405, '405: Method Not Allowed', 'POST']);
  });

  it('decodes the run id segment and records raw and decoded paths', async () => {
    const sim = await startSim();
    const answer = await call(sim, 'GET', '/v1/runs/run%20%C3%A9%2Fx?probe=1');
    expect(answer.text).toBe(error('Run not found: run \u00e9/x', 'run_not_found').replace('\u00e9', '\\u00e9'));
    const recorded = sim.requests.at(-1);
    expect(recorded).toMatchObject({ method: 'GET', rawPath: '/v1/runs/run%20%C3%A9%2Fx?probe=1', path: '/v1/runs/run é/x' });
    expect(recorded?.headers['authorization']).toBe(`Bearer ${API_KEY}`);
    expect(typeof recorded?.receivedAt).toBe('number');
  });

  it('applies CORS: no Origin passes, unknown Origin 403 empty, allowed Origin gets the headers', async () => {
    const sim = await startSim({ corsOrigins: ['https://app.example'] });
    const denied = await call(sim, 'GET', '/v1/runs/x', { headers: { origin: 'https://evil.example' } });
    expect([denied.status, denied.text]).toEqual([403, '']);
    const deniedPost = await call(sim, 'POST', '/v1/runs', { body: '{"input": "x"}', headers: { origin: 'https://evil.example' } });
    expect(deniedPost.status).toBe(403);
    expect(sim.startCount()).toBe(0);

    const preflight = await call(sim, 'OPTIONS', '/v1/runs', { headers: { origin: 'https://app.example' } });
    expect(preflight.status).toBe(200);
    expect(preflight.headers).toMatchObject({
      'access-control-allow-origin': 'https://app.example',
      'access-control-allow-methods': 'GET, POST, DELETE, OPTIONS',
      'access-control-allow-headers': 'Authorization, Content-Type, Idempotency-Key',
      'access-control-max-age': '600',
      vary: 'Origin',
    });
    const normal = await call(sim, 'GET', '/v1/runs/x', { headers: { origin: 'https://app.example' } });
    expect([normal.status, normal.headers['access-control-allow-origin']]).toEqual([404, 'https://app.example']);

    const wildcard = await startSim({ corsOrigins: ['*'] });
    const any = await call(wildcard, 'OPTIONS', '/v1/runs', { headers: { origin: 'https://whoever.example' } });
    expect(any.headers['access-control-allow-origin']).toBe('*');
    expect(any.headers['vary']).toBeUndefined();
  });

  it('records rejected requests too, with their bodies once received', async () => {
    const sim = await startSim();
    await call(sim, 'POST', '/v1/runs', { body: '{"input": ""}' });
    await call(sim, 'GET', '/v1/runs/x', { headers: { authorization: 'nope' } });
    expect(sim.requests.map((r) => [r.method, r.path, r.body])).toEqual([
      ['POST', '/v1/runs', '{"input": ""}'],
      ['GET', '/v1/runs/x', ''],
    ]);
  });
});
