import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { describe, expect, it } from 'vitest';
import { SIM_KEY, answer, approvalRequests, call, connect, simulatorWithConfig, spawnCli, startRun, toolError, waitForOutput, writeConfig } from './helpers.js';
import { runCli } from '../cli/helpers.js';

const TOKEN_ADA = 'mcp_token_ada_7d1f3c9e2b5a4f60';
const TOKEN_BOB = 'mcp_token_bob_0a9c8e7d6b5f4e3d';

/** `hermes-aip mcp --http --port 0` for the simulator, ada's token in a file and bob's in the environment. */
async function httpServer(): Promise<{ url: string; sim: Awaited<ReturnType<typeof simulatorWithConfig>>['sim']; stderr: () => string }> {
  const { sim, folder } = await simulatorWithConfig();
  writeFileSync(join(folder, 'ada.token'), `${TOKEN_ADA}\n`, { mode: 0o600 });
  const configPath = writeConfig(folder, sim.url, {
    mcp: {
      tenantId: 'tenant-a',
      tokens: [
        { tokenFile: 'ada.token', principalId: 'user:ada' },
        { tokenEnv: 'BOB_MCP_TOKEN', principalId: 'user:bob' },
      ],
    },
  });
  const child = spawnCli(['mcp', '--config', configPath, '--http', '--port', '0'], { env: { BOB_MCP_TOKEN: TOKEN_BOB } });
  let stderr = '';
  child.stderr.on('data', (data: Buffer) => (stderr += data.toString()));
  const ready = await waitForOutput(child.stderr, /"url":"(http:\/\/127\.0\.0\.1:\d+\/mcp)"/, 'the listening line');
  const url = /"url":"(http:\/\/127\.0\.0\.1:\d+\/mcp)"/.exec(ready)?.[1] as string;
  return { url, sim, stderr: () => stderr };
}

function httpClient(url: string, token: string, elicit?: Parameters<typeof connect>[1], name?: string) {
  const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { Authorization: `Bearer ${token}` } } });
  return connect(transport, elicit, name);
}

const INITIALIZE = JSON.stringify({
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
});

function post(url: string, headers: Record<string, string>): Promise<Response> {
  return fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
    body: INITIALIZE,
  });
}

describe('hermes-aip mcp --http', { timeout: 60_000 }, () => {
  it('serves the tools over Streamable HTTP, with an elicited approval on the call stream and the token principal in the context', async () => {
    const { url, sim, stderr } = await httpServer();
    const ada = await httpClient(url, TOKEN_ADA, answer('approve', 'reviewed over http'), 'desktop-client');
    expect((await ada.client.listTools()).tools).toHaveLength(5);
    const runId = await startRun(ada.client);
    await expect.poll(() => sim.run(runId)?.status, { timeout: 10_000 }).toBe('waiting_for_approval');
    const approved = await call(ada.client, 'hermes_local_run_approval', { run_id: runId, choice: 'once', idempotency_key: 'approve-1' });
    expect(approved.structuredContent).toMatchObject({ run_id: runId, resolved: 1 });
    expect(ada.elicitations).toHaveLength(1);
    await expect.poll(() => sim.run(runId)?.status, { timeout: 10_000 }).toBe('completed');

    const bob = await httpClient(url, TOKEN_BOB);
    const refused = toolError(await call(bob.client, 'hermes_local_run_stop', { run_id: runId }));
    expect(refused.error.code).toBe('connector.hermes_agent.approval_required');
    await startRun(bob.client, { input: 'hello' });

    const principals = sim.requests.filter((request) => request.path === '/v1/runs').map((request) => request.headers['x-aip-principal-id']);
    expect(principals).toEqual(['user:ada', 'user:bob']);
    expect(sim.requests.every((request) => request.headers['x-aip-tenant-id'] === 'tenant-a')).toBe(true);
    expect(approvalRequests(sim)).toBe(1);
    expect(stderr()).not.toContain(TOKEN_ADA);
    expect(stderr()).not.toContain(TOKEN_BOB);
    expect(stderr()).not.toContain(SIM_KEY);
  });

  it('answers 401 to a missing or wrong token and 403 to a foreign Origin or Host, and calls nothing', async () => {
    const { url, sim } = await httpServer();
    const port = new URL(url).port;
    const missing = await post(url, {});
    expect(missing.status).toBe(401);
    expect(missing.headers.get('www-authenticate')).toMatch(/^Bearer /);
    expect((await post(url, { authorization: `Bearer ${TOKEN_ADA}x` })).status).toBe(401);
    expect((await post(url, { authorization: `Basic ${Buffer.from(`ada:${TOKEN_ADA}`).toString('base64')}` })).status).toBe(401);
    expect((await post(url, { authorization: `Bearer ${TOKEN_ADA}`, origin: 'http://evil.example' })).status).toBe(403);
    expect((await post(url, { authorization: `Bearer ${TOKEN_ADA}`, origin: `http://127.0.0.1:${Number(port) + 1}` })).status).toBe(403);
    expect((await post(url.replace('127.0.0.1', 'localhost'), { authorization: `Bearer ${TOKEN_ADA}`, origin: `http://localhost:${port}` })).status).toBe(200);
    const rebound = await fetchWithHost(url, `attacker.example:${port}`);
    expect(rebound).toBe(403);
    expect((await post(url.replace('/mcp', '/other'), { authorization: `Bearer ${TOKEN_ADA}` })).status).toBe(404);
    expect(sim.requests).toHaveLength(0);
  });

  it("keeps a session to the principal that opened it: another token's requests answer 404", async () => {
    const { url } = await httpServer();
    const opened = await post(url, { authorization: `Bearer ${TOKEN_ADA}` });
    expect(opened.status).toBe(200);
    const sessionId = opened.headers.get('mcp-session-id') as string;
    expect(sessionId).toBeTruthy();
    const list = JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/list', params: {} });
    const asBob = await fetch(url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        authorization: `Bearer ${TOKEN_BOB}`,
        'mcp-session-id': sessionId,
      },
      body: list,
    });
    expect(asBob.status).toBe(404);
  });

  it('refuses to start without a token, and never takes one from the arguments', async () => {
    const { sim, folder } = await simulatorWithConfig();
    const configPath = writeConfig(folder, sim.url);
    const noToken = await runCli(['mcp', '--config', configPath, '--http', '--port', '0']);
    expect(noToken.code).toBe(2);
    expect(noToken.stderr).toMatch(/HERMES_MCP_TOKEN is not set/);
    const shortToken = await runCli(['mcp', '--config', configPath, '--http', '--port', '0'], { env: { HERMES_MCP_TOKEN: 'short' } });
    expect(shortToken.code).toBe(2);
    expect(shortToken.stderr).toMatch(/at least 16/);
    const inArguments = await runCli(['mcp', '--config', configPath, '--http', '--token', TOKEN_ADA]);
    expect(inArguments.code).toBe(2);
    expect(inArguments.stderr).toMatch(/MCP bearer tokens from "mcp.tokens" \(tokenFile or tokenEnv\) in --config, or HERMES_MCP_TOKEN/);
    expect(inArguments.stderr).not.toContain(TOKEN_ADA);
    const inConfig = writeConfig(folder, sim.url, { mcp: { tokens: [{ token: TOKEN_ADA }] } });
    const refused = await runCli(['mcp', '--config', inConfig, '--http']);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toMatch(/"token" is not read from the config file/);
    expect(refused.stderr).not.toContain(TOKEN_ADA);
  });
});

/** fetch() sets Host itself; a raw request can claim another host, as a DNS-rebound browser page would. */
async function fetchWithHost(url: string, host: string): Promise<number> {
  const { request } = await import('node:http');
  return new Promise((resolve, reject) => {
    const req = request(url, { method: 'POST', headers: { host, authorization: `Bearer ${TOKEN_ADA}`, 'content-type': 'application/json' } }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on('error', reject);
    req.end(INITIALIZE);
  });
}
