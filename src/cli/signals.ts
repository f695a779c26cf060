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
