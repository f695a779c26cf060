import { HermesFailure } from '../failures.js';
import { callJson } from './json-call.js';
import { RUNS_ROUTE, type Operation } from './operation.js';

export interface RunStartInput {
  body: { input: string | Array<Record<string, unknown>>; [field: string]: unknown };
  session_key?: string;
}

/** POST /v1/runs: the body goes to Hermes as given; `session_key` travels only as a header. */
export const runStart: Operation<RunStartInput> = {
  name: 'run_start',
  checkInput({ body }) {
    if (Array.isArray(body.input) && !hasContent(body.input[body.input.length - 1]?.content)) {
      throw new HermesFailure('invalid_input', 'The last message of `body.input` must have non-empty `content`');
    }
  },
  execute: (call) => callJson(call, { method: 'POST', route: RUNS_ROUTE, body: call.input.body, sessionKey: call.input.session_key }),
};

function hasContent(content: unknown): boolean {
  return (typeof content === 'string' || Array.isArray(content)) && content.length > 0;
}
