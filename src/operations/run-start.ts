import { HermesFailure } from '../failures.js';
import { callJson } from './json-call.js';
import type { Operation } from './operation.js';

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
  execute: (call) => callJson(call, { method: 'POST', path: '/v1/runs', body: call.input.body, sessionKey: call.input.session_key }),
};

function hasContent(content: unknown): boolean {
  return (typeof content === 'string' || Array.isArray(content)) && content.length > 0;
}
