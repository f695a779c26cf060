/**
 * Every timer the simulator starts goes through one registry, so that `close()`
 * and `restart()` can cancel them all and nothing keeps the process alive.
 */
export class TimerRegistry {
  private readonly pending = new Map<NodeJS.Timeout, () => void>();
  private closed = false;

  /**
   * Resolves `true` after `ms`, or `false` early when `signal` aborts or the
   * registry is cleared. Never rejects.
   */
  delay(ms: number, signal?: AbortSignal): Promise<boolean> {
    return new Promise<boolean>((resolve) => {
      if (this.closed || signal?.aborted) {
        resolve(false);
        return;
      }
      const finish = (elapsed: boolean): void => {
        clearTimeout(timer);
        this.pending.delete(timer);
        signal?.removeEventListener('abort', onAbort);
        resolve(elapsed);
      };
      const onAbort = (): void => finish(false);
      const timer = setTimeout(() => finish(true), Math.max(0, ms));
      timer.unref();
      this.pending.set(timer, () => finish(false));
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  /** Cancels every pending delay (each resolves `false`). */
  clearAll(): void {
    for (const cancel of [...this.pending.values()]) cancel();
  }

  /** Cancels everything and refuses new delays (they resolve `false` at once). */
  close(): void {
    this.closed = true;
    this.clearAll();
  }
}
