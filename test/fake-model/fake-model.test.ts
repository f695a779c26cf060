/**
 * The fake OpenAI-compatible model (built, from dist/) over real HTTP on 127.0.0.1:0: replies chosen
 * from the request alone, streamed and plain, usage on request, fast 404s for other probes.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { defaultApprovalPrompt, DEFAULT_HARMLESS_PROMPT } from '../../src/cli/qualify/command.js';
import { decideReply, FAKE_MODEL_ID, startFakeModel, type FakeModel } from 'aip-connector-hermes-agent/fake-model';

const TOOLS = [{ type: 'function', function: { name: 'terminal', parameters: { type: 'object' } } }];
const user = (content: unknown) => ({ role: 'user', content });

let model: FakeModel;
beforeAll(async () => {
  model = await startFakeModel();
});
afterAll(async () => {
  await model.close();
});

const post = (body: unknown) =>
  fetch(`${model.baseUrl}/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });

/** The JSON chunks of a streamed reply, checking the `data: …\n\n` framing and the final [DONE]. */
async function streamedChunks(response: Response): Promise<Array<Record<string, any>>> {
  expect(response.headers.get('content-type')).toBe('text/event-stream');
  const frames = (await response.text()).split('\n\n');
  expect(frames.pop()).toBe('');
  expect(frames.pop()).toBe('data: [DONE]');
  return frames.map((frame) => {
    expect(frame.startsWith('data: ')).toBe(true);
    return JSON.parse(frame.slice('data: '.length)) as Record<string, any>;
  });
}

describe('decideReply', () => {
  test('no tools offered: a short text, whatever the prompt says', () => {
    expect(decideReply({ messages: [user('Run the shell command: ls')] })).toEqual({ kind: 'text', text: 'Fake model reply.' });
    expect(decideReply({ messages: [user('Run the shell command: ls')], tools: [] }).kind).toBe('text');
  });

  test('after a tool result: a non-empty final text', () => {
    const reply = decideReply({
      messages: [user('Run the shell command: ls'), { role: 'assistant', content: null }, { role: 'tool', content: 'x' }],
      tools: TOOLS,
    });
    expect(reply).toEqual({ kind: 'text', text: 'The command has finished.' });
  });

  test('"Run the shell command: <cmd>" calls the terminal tool with that command', () => {
    expect(decideReply({ messages: [user('Please. Run the shell command: sleep 30')], tools: TOOLS })).toEqual({
      kind: 'tool_call',
      name: 'terminal',
      arguments: { command: 'sleep 30' },
    });
  });

  test("the qualification's default approval prompt asks for its recursive delete, and nothing more", () => {
    const command = 'rm -rf ./aip-qualification-scratch-0123456789ab';
    expect(decideReply({ messages: [user(defaultApprovalPrompt(command))], tools: TOOLS })).toEqual({
      kind: 'tool_call',
      name: 'terminal',
      arguments: { command },
    });
  });

  test("the qualification's harmless prompt is answered with its word", () => {
    expect(decideReply({ messages: [user(DEFAULT_HARMLESS_PROMPT)], tools: TOOLS })).toEqual({ kind: 'text', text: 'ready' });
  });

  test('"Stream N deltas" streams a text of N deltas, one number each; at most 10000', () => {
    const deltasOf = (prompt: string): string[] => {
      const reply = decideReply({ messages: [user(prompt)], tools: TOOLS });
      if (reply.kind !== 'text' || reply.deltas === undefined) throw new Error(`no deltas: ${JSON.stringify(reply)}`);
      expect(reply.text).toBe(reply.deltas.join(''));
      return reply.deltas;
    };
    const deltas = deltasOf('Stream 1200 deltas.');
    expect(deltas).toHaveLength(1200);
    expect(deltas.slice(0, 2)).toEqual(['1 ', '2 ']);
    expect(deltas.at(-1)).toBe('1200');
    expect(deltasOf('Stream 99999 deltas')).toHaveLength(10_000);
  });

  test('the last user message decides, list-of-parts content included; anything else gets the default text', () => {
    const parts = user([{ type: 'text', text: 'Run the shell command: echo hi' }]);
    expect(decideReply({ messages: [user('Reply with the single word: old'), { role: 'assistant', content: 'old' }, parts], tools: TOOLS })).toMatchObject({
      arguments: { command: 'echo hi' },
    });
    expect(decideReply({ messages: [{ role: 'system', content: 'Run the shell command: ls' }, user('Hello')], tools: TOOLS })).toEqual({
      kind: 'text',
      text: 'Hello from the fake model.',
    });
    expect(decideReply({ tools: TOOLS })).toEqual({ kind: 'text', text: 'Hello from the fake model.' });
  });
});

describe('the fake model over HTTP', () => {
  test('GET /v1/models lists the fake model', async () => {
    const response = await fetch(`${model.baseUrl}/models`);
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ object: 'list', data: [{ id: FAKE_MODEL_ID, object: 'model', created: 0, owned_by: 'aip-fake-model' }] });
  });

  test('a streamed text reply: several content deltas, finish_reason stop, then usage when asked', async () => {
    const chunks = await streamedChunks(
      await post({ model: FAKE_MODEL_ID, stream: true, stream_options: { include_usage: true }, tools: TOOLS, messages: [user('Hi')] }),
    );
    const usage = chunks.pop();
    expect(usage).toMatchObject({
      object: 'chat.completion.chunk',
      choices: [],
      usage: { prompt_tokens: expect.any(Number), completion_tokens: expect.any(Number) },
    });
    expect(usage?.usage.total_tokens).toBe(usage?.usage.prompt_tokens + usage?.usage.completion_tokens);
    const last = chunks.pop();
    expect(last?.choices).toEqual([{ index: 0, delta: {}, finish_reason: 'stop' }]);
    expect(chunks.length).toBeGreaterThan(1);
    expect(chunks[0]?.choices[0].delta.role).toBe('assistant');
    expect(chunks.map((chunk) => chunk.choices[0].delta.content).join('')).toBe('Hello from the fake model.');
    expect(new Set([...chunks, last].map((chunk) => chunk?.id)).size).toBe(1);
  });

  test('a streamed "Stream N deltas" reply: exactly N content chunks before the finish', async () => {
    const chunks = await streamedChunks(await post({ stream: true, tools: TOOLS, messages: [user('Stream 25 deltas')] }));
    expect(chunks.pop()?.choices[0].finish_reason).toBe('stop');
    expect(chunks.map((chunk) => chunk.choices[0].delta.content)).toEqual(Array.from({ length: 25 }, (_, index) => (index === 24 ? '25' : `${index + 1} `)));
  });

  test('a streamed tool call: the name first, then complete JSON arguments, finish_reason tool_calls; no usage unless asked', async () => {
    const chunks = await streamedChunks(await post({ stream: true, tools: TOOLS, messages: [user('Run the shell command: rm -rf ./scratch')] }));
    expect(chunks).toHaveLength(3);
    const [named, args, finish] = chunks;
    expect(named?.choices[0].delta).toEqual({
      role: 'assistant',
      tool_calls: [{ index: 0, id: expect.stringMatching(/^call_[0-9a-f]{16}$/), type: 'function', function: { name: 'terminal', arguments: '' } }],
    });
    expect(JSON.parse(args?.choices[0].delta.tool_calls[0].function.arguments)).toEqual({ command: 'rm -rf ./scratch' });
    expect(finish?.choices[0].finish_reason).toBe('tool_calls');
  });

  test('a plain (non-streamed) reply carries the same decision as one chat.completion', async () => {
    const response = await post({ tools: TOOLS, messages: [user('Run the shell command: ls -la')] });
    expect(response.headers.get('content-type')).toBe('application/json');
    const body = (await response.json()) as Record<string, any>;
    expect(body).toMatchObject({
      object: 'chat.completion',
      model: FAKE_MODEL_ID,
      choices: [{ index: 0, finish_reason: 'tool_calls', message: { role: 'assistant', content: null } }],
    });
    expect(JSON.parse(body.choices[0].message.tool_calls[0].function.arguments)).toEqual({ command: 'ls -la' });
    const text = (await (await post({ messages: [user('Hi')] })).json()) as Record<string, any>;
    expect(text.choices[0]).toEqual({ index: 0, message: { role: 'assistant', content: 'Fake model reply.' }, finish_reason: 'stop' });
  });

  test('other probes get an immediate 404, a non-object body a 400, and every request is recorded', async () => {
    const before = model.requests.length;
    for (const path of ['/api/tags', '/v1/props', '/props', '/version', '/api/v1/models']) {
      expect((await fetch(`${model.baseUrl.replace(/\/v1$/, '')}${path}`)).status).toBe(404);
    }
    expect((await post([1, 2])).status).toBe(400);
    expect(model.requests.slice(before).map((request) => request.path)).toEqual([
      '/api/tags',
      '/v1/props',
      '/props',
      '/version',
      '/api/v1/models',
      '/v1/chat/completions',
    ]);
    await post({ stream: true, messages: [user('Hi')] }).then((response) => response.text());
    expect(model.requests.at(-1)).toEqual({ method: 'POST', path: '/v1/chat/completions', reply: 'text', stream: true });
  });
});
