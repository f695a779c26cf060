import type { OperationName } from '../types.js';
import type { Operation } from './operation.js';
import { runApproval } from './run-approval.js';
import { runEvents } from './run-events.js';
import { runStart } from './run-start.js';
import { runStatus } from './run-status.js';
import { runSteer } from './run-steer.js';
import { runStop } from './run-stop.js';

// biome-ignore lint/suspicious/noExplicitAny: each operation narrows its own validated input
export type AnyOperation = Operation<any>;

export const OPERATIONS: Readonly<Record<OperationName, AnyOperation>> = {
  run_start: runStart,
  run_status: runStatus,
  run_events: runEvents,
  run_approval: runApproval,
  run_stop: runStop,
  run_steer: runSteer,
};
