/**
 * What §3 calls a signed result and a signed error, as vitest expectations over a
 * dispatcher outcome. Every central check must pass; a failed one is shown by name.
 */
import { expect } from 'vitest';
import type { Deployment } from './deployment-fixture.js';
import { runStartAction } from './deployment-fixture.js';
import type { Outcome } from './dispatcher.js';

function describeOutcome(outcome: Outcome): string {
  return `HTTP ${outcome.exchange.status} ${outcome.exchange.text.slice(0, 600)}`;
}

/** A 200 signed `action_result` for the routed action that passes every central check. */
export function expectSignedResult(outcome: Outcome): NonNullable<Outcome['verdict']['actionResult']> {
  expect(outcome.verdict.failed, describeOutcome(outcome)).toEqual([]);
  expect(outcome.exchange.status, describeOutcome(outcome)).toBe(200);
  expect(outcome.verdict.actionResult, describeOutcome(outcome)).toBeDefined();
  return outcome.verdict.actionResult!;
}

/** A signed error envelope with this HTTP status and code that passes every central check. */
export function expectSignedError(outcome: Outcome, status: number, code: string, category?: string, retryable?: boolean): void {
  expect(outcome.verdict.failed, describeOutcome(outcome)).toEqual([]);
  expect(outcome.exchange.status, describeOutcome(outcome)).toBe(status);
  expect(outcome.verdict.error?.code, describeOutcome(outcome)).toBe(code);
  if (category !== undefined) expect(outcome.verdict.error?.category, describeOutcome(outcome)).toBe(category);
  if (retryable !== undefined) expect(outcome.verdict.error?.retryable, describeOutcome(outcome)).toBe(retryable);
}

/** 401/403 route answers: `connector_host.route_mismatch`, category `auth`, not retryable. */
export function expectRouteMismatch(outcome: Outcome, status: 401 | 403): void {
  expectSignedError(outcome, status, 'connector_host.route_mismatch', 'auth', false);
}

/** Starts a Hermes run through the host (`run_start`, verified) and returns its id. */
export async function startRunThroughHost(deployment: Deployment, body?: Record<string, unknown>): Promise<string> {
  const outcome = await deployment.runtime.dispatcher.invoke(deployment.host.target, runStartAction(body));
  return (expectSignedResult(outcome).output as { run_id: string }).run_id;
}
