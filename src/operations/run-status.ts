import { ERROR_CODE_PREFIX } from '../internal/package-info.js';
import { callJson } from './json-call.js';
import type { RunEvidencePatch } from '../ledger/types.js';
import { checkRunId, runRoute, type Operation } from './operation.js';

export interface RunIdInput {
  run_id: string;
}

/** GET /v1/runs/{run_id}: the provider's status object. */
export const runStatus: Operation<RunIdInput> = {
  name: 'run_status',
  checkInput: ({ run_id }) => checkRunId(run_id),
  execute: (call) => callJson(call, { method: 'GET', route: runRoute(call.input.run_id, '') }),
  learnAboutRun({ result, now }) {
    if (result.status === 'completed') return statusPatch(result.output as HermesRunStatus, now);
    // Hermes no longer knows the run: retention expiry or a restart, never "did not run".
    if (result.error?.code === `${ERROR_CODE_PREFIX}not_found`) return { updated_at: now, evidence_lost: true };
    return undefined;
  },
};

/** The part of Hermes' status object the ledger keeps. */
interface HermesRunStatus {
  status: string;
  /** Epoch seconds of the record's last change; on an `interrupted` run, when Hermes marked it so. */
  updated_at?: unknown;
}

/** What a status read teaches about a run: its status and, once Hermes says it was interrupted, when (from Hermes' own record). */
export function statusPatch({ status, updated_at }: HermesRunStatus, now: number): RunEvidencePatch {
  const patch: RunEvidencePatch = { updated_at: now, last_status: status };
  if (status === 'interrupted' && typeof updated_at === 'number' && Number.isFinite(updated_at) && updated_at > 0) {
    patch.interrupted_at = Math.round(updated_at * 1000);
  }
  return patch;
}
