/** Exit codes of `hermes-aip`. */
export const EXIT = {
  ok: 0,
  /** A qualification or an invocation did not succeed. */
  failed: 1,
  /** Bad arguments or configuration: nothing was attempted. */
  usage: 2,
  /** `admission`: evidence missing or failed, so nothing was signed. */
  refused: 3,
  /** Interrupted by SIGINT/SIGTERM. */
  interrupted: 130,
} as const;

/** An error the CLI reports as one line on stderr, then exits with `exitCode`. Its message never holds a secret. */
export class CliError extends Error {
  readonly exitCode: number;

  constructor(message: string, exitCode: number = EXIT.failed) {
    super(message);
    this.name = 'CliError';
    this.exitCode = exitCode;
  }
}

/** Bad arguments or configuration (exit 2). */
export class UsageError extends CliError {
  constructor(message: string) {
    super(message, EXIT.usage);
    this.name = 'UsageError';
  }
}

/** The single stderr line for any error, and its exit code. Unknown errors get their message only, never a stack. */
export function describeError(error: unknown): { line: string; exitCode: number } {
  if (error instanceof CliError) return { line: `hermes-aip: ${oneLine(error.message)}`, exitCode: error.exitCode };
  const message = error instanceof Error ? error.message : String(error);
  return { line: `hermes-aip: unexpected error: ${oneLine(message)}`, exitCode: EXIT.failed };
}

function oneLine(text: string): string {
  return text.replace(/\s*[\r\n]+\s*/g, ' ').trim();
}
