import { spawn } from 'node:child_process';
import { createConnection, createServer, type AddressInfo, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import {
  CLI,
  SIM_KEY,
  answer,
  approvalRequests,
  call,
  progressMessages,
  simulatorWithConfig,
  startRun,
  stdioClient,
  toolError,
  waitForOutput,
  writeConfig,
} from './helpers.js';
import type { RunEventsOutput } from 'aip-connector-hermes-agent';

const OPERATIONS = ['run_start', 'run_status', 'run_events', 'run_approval', 'run_stop'];

describe('hermes-aip mcp over stdio', { timeout: 60_000 }, () => {
  it('lists one tool per capability with its schemas and the contract as annotations', async () => {
    const { configPath } = await simulatorWithConfig();
    const { client } = await stdioClient(['--config', configPath]);
    const { tools } = await client.listTools();
    expect(tools.map((tool) => tool.name)).toEqual(OPERATIONS.map((operation) => `hermes_local_${operation}`));
    const byOperation = new Map(tools.map((tool) => [tool.name.replace('hermes_local_', ''), tool]));
    expect(byOperation.get('run_status')?.annotations).toEqual({
      title: 'Hermes Agent run status (local)',
      readOnlyHint: true,
      destructiveHint: false,
      idempotentHint: true,
      openWorldHint: true,
    });
    expect(byOperation.get('run_events')?.annotations).toMatchObject({ readOnlyHint: true, idempotentHint: true });
    expect(byOperation.get('run_stop')?.annotations).toMatchObject({ readOnlyHint: false, destructiveHint: true, idempotentHint: false });
    expect(byOperation.get('run_start')?.annotations).toMatchObject({ readOnlyHint: false, destructiveHint: false, idempotentHint: false });
    for (const operation of ['run_start', 'run_approval', 'run_stop']) {
      expect(Object.keys(byOperation.get(operation)?.inputSchema.properties ?? {})).toContain('idempotency_key');
    }
    for (const operation of ['run_status', 'run_events']) {
      expect(Object.keys(byOperation.get(operation)?.inputSchema.properties ?? {})).not.toContain('idempotency_key');
    }
    expect(byOperation.get('run_stop')?.inputSchema).toMatchObject({ required: ['run_id'], additionalProperties: false });
    expect(byOperation.get('run_stop')?.description).toContain('approve or deny');
    for (const tool of tools) expect(JSON.stringify(tool)).not.toMatch(/"\$schema"|"\$id"/);
  });

  it('runs a lifecycle: start, an approval the person approves through the form, events, status', async () => {
    const { sim, configPath } = await simulatorWithConfig();
    const { client, elicitations, stderr } = await stdioClient(['--config', configPath], { elicit: answer('approve', 'scratch folder only') });
    const runId = await startRun(client);
    await expect.poll(() => sim.run(runId)?.status, { timeout: 10_000 }).toBe('waiting_for_approval');

    const approved = await call(client, 'hermes_local_run_approval', { run_id: runId, choice: 'once' });
    expect(approved.isError, JSON.stringify(approved)).toBeFalsy();
    expect(approved.structuredContent).toMatchObject({ run_id: runId, choice: 'once', resolved: 1 });
    expect(elicitations).toHaveLength(1);
    const form = elicitations[0]?.params as { message: string; requestedSchema: { required: string[] } };
    expect(form.message).toContain('endpoint "local"');
    expect(form.message).toContain(`Run: ${runId}`);
    expect(form.message).toContain(JSON.stringify({ run_id: runId, choice: 'once' }));
    expect(form.requestedSchema.required).toEqual(['decision', 'reason']);
    expect(approvalRequests(sim)).toBe(1);

    const events = await call(client, 'hermes_local_run_events', { run_id: runId });
    expect(events.structuredContent).toMatchObject({ terminal: true, terminal_event: 'run.completed' });
    const status = await call(client, 'hermes_local_run_status', { run_id: runId });
    expect(status.structuredContent).toMatchObject({ run_id: runId, status: 'completed' });
    expect((status.content[0] as { text: string }).text).toContain('completed');
    expect(JSON.stringify([approved, events, status]) + stderr()).not.toContain(SIM_KEY);
  });

  it('refuses run_approval as approval_required when the person declines or denies, and Hermes never hears of it', async () => {
    const { sim, configPath } = await simulatorWithConfig();
    const decline = await stdioClient(['--config', configPath], { elicit: () => ({ action: 'decline' }) });
    const runId = await startRun(decline.client);
    await expect.poll(() => sim.run(runId)?.status, { timeout: 10_000 }).toBe('waiting_for_approval');

    const declined = toolError(await call(decline.client, 'hermes_local_run_approval', { run_id: runId, choice: 'once' }));
    expect(declined).toMatchObject({ status: 'failed', error: { code: 'connector.hermes_agent.approval_required', category: 'policy', retryable: false } });
    expect(declined.error.message).toContain('declined');
    expect(decline.elicitations).toHaveLength(1);

    const deny = await stdioClient(['--config', configPath], { elicit: answer('deny') });
    const denied = toolError(await call(deny.client, 'hermes_local_run_stop', { run_id: runId }));
    expect(denied.error.code).toBe('connector.hermes_agent.approval_required');
    expect(denied.error.message).toContain('denied');
    expect(approvalRequests(sim)).toBe(0);
    expect(sim.requests.filter((request) => request.path.endsWith('/stop'))).toHaveLength(0);
    expect(sim.run(runId)?.status).toBe('waiting_for_approval');
  });

  it('refuses approvals without asking when the client cannot elicit, or with --no-approvals', async () => {
    const { sim, configPath } = await simulatorWithConfig();
    const mute = await stdioClient(['--config', configPath]);
    const runId = await startRun(mute.client);
    await expect.poll(() => sim.run(runId)?.status, { timeout: 10_000 }).toBe('waiting_for_approval');
    const refused = toolError(await call(mute.client, 'hermes_local_run_approval', { run_id: runId, choice: 'once' }));
    expect(refused.error.code).toBe('connector.hermes_agent.approval_required');
    expect(refused.error.message).toContain('does not offer elicitation');

    const disabled = await stdioClient(['--config', configPath, '--no-approvals'], { elicit: answer('approve') });
    const off = toolError(await call(disabled.client, 'hermes_local_run_stop', { run_id: runId, idempotency_key: 'stop-1' }));
    expect(off.error.message).toContain('--no-approvals');
    expect(disabled.elicitations).toHaveLength(0);
    expect(approvalRequests(sim)).toBe(0);
    expect(sim.requests.filter((request) => request.path.endsWith('/stop'))).toHaveLength(0);
  });

  it('asks no one about an input the connector refuses anyway', async () => {
    const { configPath } = await simulatorWithConfig();
    const { client, elicitations } = await stdioClient(['--config', configPath], { elicit: answer('approve') });
    const invalid = toolError(await call(client, 'hermes_local_run_approval', { run_id: 'run_x', choice: 'maybe' }));
    expect(invalid.error.code).toBe('connector.hermes_agent.invalid_input');
    expect(elicitations).toHaveLength(0);
  });

  it('sends one progress notification per event to a client that asked for progress', async () => {
    const { configPath } = await simulatorWithConfig();
    const { client, received } = await stdioClient(['--config', configPath]);
    const body = {
      input: 'x',
      sim_script: [
        { type: 'delta', text: 'Hel' },
        { type: 'tool', tool: 'terminal' },
        { type: 'delta', text: 'lo' },
        { type: 'complete', output: 'Hello' },
      ],
    };
    const runId = await startRun(client, body);
    const result = await client.callTool({ name: 'hermes_local_run_events', arguments: { run_id: runId } }, undefined, { onprogress: () => {} });
    const output = result.structuredContent as { events: Array<{ event: string }>; text: string };
    expect(output.text).toBe('Hel\n\nlo'); // the deltas as streamed: Hermes breaks the paragraph after a tool
    const progress = progressMessages(received);
    expect(progress.map((notification) => notification.progress)).toEqual(output.events.map((_, index) => index + 1));
    expect(progress.map((notification) => notification.message)).toEqual([
      'message.delta: Hel',
      // Hermes reports each model turn that ends in text (the simulator does as the real server does).
      'reasoning.available: Hel',
      'tool.started',
      'tool.completed',
      'message.delta: lo',
      'reasoning.available: lo',
      'run.completed: Hello',
    ]);

    const quiet = await stdioClient(['--config', configPath]);
    const second = await startRun(quiet.client, body);
    await quiet.client.callTool({ name: 'hermes_local_run_events', arguments: { run_id: second } });
    expect(progressMessages(quiet.received)).toEqual([]);
  });

  it('aborts a stream through the connector when the client cancels the call', async () => {
    const { sim, folder } = await simulatorWithConfig();
    const proxy = await watchingProxy(sim.port);
    const configPath = writeConfig(folder, proxy.url);
    const { client, received, stderr } = await stdioClient(['--config', configPath]);
    const runId = await startRun(client, { input: 'x', sim_script: [{ type: 'delta', text: 'first' }, { type: 'sleep', ms: 20_000 }, { type: 'complete' }] });
    const cancel = new AbortController();
    const pending = client.callTool({ name: 'hermes_local_run_events', arguments: { run_id: runId } }, undefined, {
      onprogress: () => {},
      signal: cancel.signal,
    });
    await expect.poll(() => progressMessages(received).length, { timeout: 10_000 }).toBe(1);
    cancel.abort('the person moved on');
    await expect(pending).rejects.toThrow();
    await expect
      .poll(stderr, { timeout: 10_000 })
      .toMatch(/"tool":"hermes_local_run_events".*"code":"connector\.hermes_agent\.cancelled".*tool call cancelled by the client/);
    // The SSE connection is closed; the run itself goes on.
    expect(proxy.eventStreams()).toEqual([{ closed: true }]);
    expect(sim.run(runId)?.status).toBe('running');
    const status = await call(client, 'hermes_local_run_status', { run_id: runId });
    expect(status.structuredContent).toMatchObject({ run_id: runId, status: 'running' });
  });

  it('reports Hermes failures as typed error results, never protocol errors', async () => {
    const { sim, configPath } = await simulatorWithConfig();
    const { client } = await stdioClient(['--config', configPath]);
    const missing = toolError(await call(client, 'hermes_local_run_status', { run_id: 'run_00000000000000000000000000000000' }));
    expect(missing).toMatchObject({
      status: 'failed',
      error: { code: 'connector.hermes_agent.not_found', category: 'permanent', retryable: false, details: { uncertain_outcome: false } },
    });
    sim.injectFault({ route: 'start', response: { status: 503, body: '{"error":{"message":"busy"}}' } });
    const busy = await call(client, 'hermes_local_run_start', { body: { input: 'x' } });
    expect(toolError(busy).error).toMatchObject({ code: 'connector.hermes_agent.remote_temporary', retryable: false, details: { uncertain_outcome: true } });
    expect((busy.content[0] as { text: string }).text).toContain('outcome uncertain');
    await expect(client.callTool({ name: 'hermes_other_run_status', arguments: { run_id: 'x' } })).rejects.toThrow(/Unknown tool/);
  });

  it('returns a run Hermes ended with run.cancelled as the connector did: cancelled, its events and text, no invented error', async () => {
    const { sim, configPath } = await simulatorWithConfig();
    const { client } = await stdioClient(['--config', configPath], { elicit: answer('approve', 'stop the test run') });
    const script = [{ type: 'delta', text: 'partial answer' }, { type: 'sleep', ms: 20_000 }, { type: 'complete' }];
    const runId = await startRun(client, { input: 'x', sim_script: script });
    const stopped = await call(client, 'hermes_local_run_stop', { run_id: runId });
    expect(stopped.isError, JSON.stringify(stopped)).toBeFalsy();
    await expect.poll(() => sim.run(runId)?.status, { timeout: 10_000 }).toBe('cancelled');

    const events = await call(client, 'hermes_local_run_events', { run_id: runId });
    expect(events.isError, JSON.stringify(events)).toBeFalsy();
    const structured = events.structuredContent as { status: string; action_id: string; error?: unknown; output: RunEventsOutput };
    expect(structured).toMatchObject({ status: 'cancelled', action_id: expect.stringMatching(/^act_/) });
    expect(structured).not.toHaveProperty('error');
    expect(structured.output).toMatchObject({ terminal: true, terminal_event: 'run.cancelled', text: 'partial answer' });
    expect(structured.output.events.map((event) => event.event)).toEqual(['message.delta', 'run.cancelled']);
    const text = (events.content[0] as { text: string }).text;
    expect(text).toContain('cancelled');
    expect(text).toContain('partial answer');
    expect(text).not.toMatch(/internal|uncertain/);
  });

  it('generates an idempotency key per call when none is given, and replays a given one', async () => {
    const { sim, configPath } = await simulatorWithConfig();
    const { client } = await stdioClient(['--config', configPath]);
    const body = { input: 'hello' };
    const first = await startRun(client, body);
    const second = await startRun(client, body);
    expect(second).not.toBe(first);
    const keyed = await startRun(client, body, 'mcp-test-key-1');
    expect(await startRun(client, body, 'mcp-test-key-1')).toBe(keyed);
    expect(sim.startCount()).toBe(3);
    const badKey = toolError(await call(client, 'hermes_local_run_start', { body, idempotency_key: 42 }));
    expect(badKey.error.code).toBe('connector.hermes_agent.invalid_input');
  });

  it('uses the configured tenant and principal as the execution context', async () => {
    const { sim, folder } = await simulatorWithConfig();
    const configPath = writeConfig(folder, sim.url, { mcp: { tenantId: 'tenant-a', principalId: 'user:ada' } });
    const { client } = await stdioClient(['--config', configPath]);
    await startRun(client, { input: 'hello' });
    const start = sim.requests.find((request) => request.method === 'POST' && request.path === '/v1/runs');
    expect(start?.headers).toMatchObject({ 'x-aip-principal-id': 'user:ada', 'x-aip-tenant-id': 'tenant-a' });
  });

  it('serves the ledger evidence of a run as hermes://evidence/{id} when a ledger is configured', async () => {
    const { sim, folder } = await simulatorWithConfig();
    const withLedger = await stdioClient(['--config', writeConfig(folder, sim.url, { ledger: { sqlite: 'runs.db' } })]);
    const runId = await startRun(withLedger.client, { input: 'hello' });
    const { resourceTemplates } = await withLedger.client.listResourceTemplates();
    expect(resourceTemplates.map((template) => template.uriTemplate)).toEqual(['hermes://evidence/{id}']);
    const read = await withLedger.client.readResource({ uri: `hermes://evidence/${runId}` });
    expect(JSON.parse((read.contents[0] as { text: string }).text)).toMatchObject({ run_id: runId, endpoint_id: 'local', evidence_lost: false });
    await expect(withLedger.client.readResource({ uri: 'hermes://evidence/run_unknown' })).rejects.toThrow(/Resource not found/);

    const withoutLedger = await stdioClient(['--config', writeConfig(folder, sim.url)]);
    expect(withoutLedger.client.getServerCapabilities()?.resources).toBeUndefined();
  });

  it('ends the session, not the process with an unhandled EPIPE, when the client closes its end of our stdout', async () => {
    const { configPath } = await simulatorWithConfig();
    const child = spawn(process.execPath, [CLI, 'mcp', '--config', configPath], { env: { PATH: process.env['PATH'] ?? '' }, stdio: 'pipe' });
    let stderr = '';
    child.stderr.on('data', (data: Buffer) => (stderr += data.toString()));
    const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
    const send = (message: Record<string, unknown>) => child.stdin.write(`${JSON.stringify({ jsonrpc: '2.0', ...message })}\n`);
    send({ id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'gone', version: '1' } } });
    await waitForOutput(child.stdout, '"id":1', 'the answer to initialize');
    send({ method: 'notifications/initialized' });
    child.stdout.destroy();
    for (let id = 2; id < 6; id++) send({ id, method: 'tools/list' });
    expect(await exited, stderr).toBe(0);
    expect(stderr).not.toContain("Unhandled 'error'");
  });
});

const proxies: Array<() => void> = [];
afterEach(() => {
  for (const close of proxies.splice(0)) close();
});

/** A TCP proxy to the simulator that remembers which connections carried an event stream, and whether they closed. */
async function watchingProxy(port: number): Promise<{ url: string; eventStreams: () => Array<{ closed: boolean }> }> {
  const streams: Array<{ closed: boolean }> = [];
  const sockets = new Set<Socket>();
  const server = createServer((downstream) => {
    const upstream = createConnection(port, '127.0.0.1');
    sockets.add(downstream).add(upstream);
    // Pooled connections carry several requests: any of them may be the stream's.
    const watch = (data: Buffer): void => {
      if (!/(^|\n)GET \S+\/events /.test(data.toString('latin1'))) return;
      downstream.off('data', watch);
      const stream = { closed: false };
      streams.push(stream);
      downstream.once('close', () => (stream.closed = true));
    };
    downstream.on('data', watch);
    downstream.pipe(upstream).pipe(downstream);
    const end = () => {
      downstream.destroy();
      upstream.destroy();
    };
    downstream.once('close', end).on('error', end);
    upstream.once('close', end).on('error', end);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  proxies.push(() => {
    for (const socket of sockets) socket.destroy();
    server.close();
  });
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, eventStreams: () => streams.map((stream) => ({ ...stream })) };
}
