import { isPlainObject, messageText } from './run-request.js';
import type { RunStep } from './types.js';

/**
 * The script used when `options.script` is absent:
 * - `body.sim_script` when it is an array (real Hermes ignores unknown fields);
 * - a recursive-delete flow with an approval when the user message contains `rm -rf`;
 * - otherwise a plain "Hello world" answer.
 */
export function defaultScript(body: Record<string, unknown>, userMessage: unknown): RunStep[] {
  const custom = body['sim_script'];
  if (Array.isArray(custom)) return custom.filter(isRunStep);
  const text = messageText(userMessage);
  if (text.includes('rm -rf')) return recursiveDeleteScript(commandIn(text));
  return [
    { type: 'delta', text: 'Hello' },
    { type: 'delta', text: ' world' },
    { type: 'complete', output: 'Hello world' },
  ];
}

function recursiveDeleteScript(command: string): RunStep[] {
  return [
    { type: 'delta', text: 'Checking ' },
    { type: 'delta', text: 'the disk.' },
    { type: 'approval', command, pattern_key: 'recursive delete', description: 'recursive delete' },
    { type: 'tool', tool: 'terminal' },
    { type: 'complete', output: 'Done.' },
  ];
}

/** "please run rm -rf ./build" → "rm -rf ./build"; without a "run " the whole message. */
function commandIn(text: string): string {
  const match = /\brun (.+)$/s.exec(text);
  return (match?.[1] ?? text).trim();
}

const STEP_TYPES = new Set(['delta', 'tool', 'reasoning', 'approval', 'sleep', 'fail', 'interrupted', 'event', 'complete', 'cut', 'raw']);

/** Steps arriving as JSON are trusted loosely: an object with a known `type`. */
function isRunStep(value: unknown): value is RunStep {
  return isPlainObject(value) && typeof value['type'] === 'string' && STEP_TYPES.has(value['type']);
}

/** A rough, always-integral token estimate (about four characters per token). */
export function estimateTokens(text: string): number {
  return text.length === 0 ? 0 : Math.ceil(text.length / 4);
}
