import { HermesFailure } from '../failures.js';
import { callJson } from './json-call.js';
import { checkRunId, runRoute, type Operation } from './operation.js';

export interface RunSteerInput {
  run_id: string;
  /** The guidance, sent as Hermes' `input` (it also reads `message` and `text`). */
  input: string;
}

/**
 * POST /v1/runs/{run_id}/steer with `{ input }`, only where the endpoint declares `run_steer` in
 * GET /v1/capabilities: elsewhere the route is Hermes' 404, which would read as an unknown run.
 */
export const runSteer: Operation<RunSteerInput> = {
  name: 'run_steer',
  checkInput: ({ run_id }) => checkRunId(run_id),
  async execute(call) {
    const offer = await call.offers.of(call.endpoint, call.context.signal);
    if (!offer.run_steer) {
      throw new HermesFailure('unsupported_capability', `Endpoint \`${call.endpoint.id}\` does not declare run_steer (GET /v1/capabilities)`, {
        details: { operation: 'run_steer', offer_source: offer.source },
      });
    }
    const { run_id, input } = call.input;
    return callJson(call, { method: 'POST', route: runRoute(run_id, '/steer'), body: { input } });
  },
};
