import { describe, expect, it } from 'vitest';
import { operationOfRequest, runRoute } from '../../src/operations/operation.js';

describe('operationOfRequest: the operation a Hermes request belongs to, from the routes the operations build', () => {
  it('names every run route an operation sends, whatever the run id and query', () => {
    expect(operationOfRequest('POST', '/v1/runs')).toBe('run_start');
    const runId = 'run_ab/c d';
    expect(operationOfRequest('GET', runRoute(runId, '').path)).toBe('run_status');
    expect(operationOfRequest('GET', `${runRoute(runId, '/events').path}?last_seq=4`)).toBe('run_events');
    expect(operationOfRequest('POST', runRoute(runId, '/approval').path)).toBe('run_approval');
    expect(operationOfRequest('POST', runRoute(runId, '/stop').path)).toBe('run_stop');
    expect(operationOfRequest('POST', runRoute(runId, '/steer').path)).toBe('run_steer');
  });

  it('names no operation for any other request', () => {
    for (const [method, path] of [
      ['GET', '/v1/runs'],
      ['GET', '/health'],
      ['GET', '/v1/capabilities'],
      ['POST', '/v1/runs/run_1/unknown'],
      ['POST', '/v1/runs/run_1/stop/again'],
      ['GET', '/v1/runs/'],
      ['POST', '/v1/runs/run_1/constructor'],
    ] as const) {
      expect(operationOfRequest(method, path), `${method} ${path}`).toBeUndefined();
    }
  });
});
