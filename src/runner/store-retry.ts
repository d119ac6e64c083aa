/**
 * Work whose start failed because the store did not answer (a database restarting) is tried
 * again a moment later, and again while it does not answer. Not once the gateway stops taking
 * work (the record keeps it for the next start), nor once the store failed for good.
 */

export interface StoreRetryHost {
  /** Set once the store failed for good (SQLite's flush failed): nothing is tried again. */
  failure(): Error | null;
  /** The session lease TTL when several gateways share the store; the wait is a third of it. */
  ttlMs: number | undefined;
  /** False once the gateway stops taking work. */
  open(): boolean;
}

export function whenStoreAnswers(host: StoreRetryHost, again: () => void): void {
  if (host.failure() !== null) return;
  const delayMs = Math.min((host.ttlMs ?? 3000) / 3, 1000);
  const timer = setTimeout(() => {
    if (host.open()) again();
  }, delayMs);
  timer.unref();
}
