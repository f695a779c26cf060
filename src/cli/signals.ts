/**
 * Calls `handler` on the first SIGINT or SIGTERM; a second one exits at once (130). Returns the
 * function that removes the listeners.
 */
export function onInterrupt(handler: () => void): () => void {
  let interrupted = false;
  const listener = (): void => {
    if (interrupted) process.exit(130);
    interrupted = true;
    process.stderr.write('hermes-aip: interrupted; finishing up (press Ctrl-C again to quit at once)\n');
    handler();
  };
  process.on('SIGINT', listener);
  process.on('SIGTERM', listener);
  return () => {
    process.off('SIGINT', listener);
    process.off('SIGTERM', listener);
  };
}

/** Resolves on the first SIGINT or SIGTERM (long-running servers: `simulate`, `fake-model`). */
export function waitForTermination(): Promise<void> {
  return new Promise<void>((resolve) => {
    const stop = (): void => {
      process.off('SIGINT', stop);
      process.off('SIGTERM', stop);
      resolve();
    };
    process.on('SIGINT', stop);
    process.on('SIGTERM', stop);
  });
}
