/**
 * Ends the gateway when its store has failed for good (SQLite: the WAL could not be flushed to
 * disk). Every store call already rejects, so no message is acknowledged and no reply is sent;
 * what is left is to stop pretending to be up. The stop is an unplanned one (exit 1), so a
 * service manager with `Restart=on-failure` starts a new process, which reopens the store and
 * recovers from its record; without one the gateway stays down rather than loop on a bad disk.
 */
import type { Logger } from "pino";
import { startPolling, type Watcher } from "./lifecycle-phase.js";

export interface StoreFailureWatcherOptions {
  failure(): Error | null;
  onFailure(failure: Error): void;
  logger: Logger;
  /** Default 1000 ms: calls reject at once anyway; this only decides when the process ends. */
  intervalMs?: number;
}

export function startStoreFailureWatcher(options: StoreFailureWatcherOptions): Watcher {
  return startPolling(async () => {
    const failure = options.failure();
    if (!failure) return "continue";
    options.logger.fatal(
      { err: failure },
      "the store has failed and commits nothing more: stopping so that a new process can reopen it",
    );
    options.onFailure(failure);
    return "done";
  }, options.intervalMs ?? 1000);
}
