/**
 * The timers of a lease holder (the journal's followers, the outbox's deliverer): renewal three
 * times per lease period, a sweep every lease period, and a first sweep on the next turn (creating
 * a connector does no I/O). Unref'd: they never keep the process alive. Clear them with clearTimeout.
 */
export function startLeaseTimers(leaseMs: number, renew: () => Promise<void>, sweep: () => Promise<void>): NodeJS.Timeout[] {
  const timers = [
    setInterval(() => void renew(), Math.max(50, Math.floor(leaseMs / 3))),
    setInterval(() => void sweep(), leaseMs),
    setTimeout(() => void sweep(), 0),
  ];
  for (const timer of timers) timer.unref();
  return timers;
}
