/**
 * Follows `.drain_request.json`: the gateway enters the reversible maintenance drain while the
 * marker is present and leaves it when the marker is removed. Running turns are never touched
 * here; the gateway refuses new turns while drained.
 */
import type { Logger } from "pino";
import type { GatewayState } from "./lifecycle.js";
import type { Watcher } from "./lifecycle-phase.js";
import { startPolling } from "./lifecycle-phase.js";
import { readDrainRequest } from "./markers.js";

export interface DrainWatcherOptions {
  home: string;
  getPhase(): GatewayState;
  /** Called once per transition into the drain (phase was `running`). */
  enterDrain(): void;
  /** Called once per transition out of it, and only while the state is still `draining`. */
  leaveDrain(): void;
  logger: Logger;
  /** Default 1000 ms. */
  intervalMs?: number;
}

/**
 * Polls the drain marker (first check at once, so a marker that survived a restart is honoured
 * right away). A corrupt marker counts as present. Entering and leaving are idempotent; a real
 * stop always wins: once stopping, the watcher never calls `leaveDrain`, so nothing turns a stop
 * back into running. Read errors are logged and change nothing.
 */
export function startDrainWatcher(options: DrainWatcherOptions): Watcher {
  const log = options.logger;
  let active = false;

  const tick = async (isStopped: () => boolean): Promise<"continue" | "done"> => {
    let present: boolean;
    try {
      present = (await readDrainRequest(options.home)) !== null;
    } catch (error) {
      log.warn({ err: error }, "drain marker check failed");
      return "continue";
    }
    if (isStopped()) return "done";
    const phase = options.getPhase();
    if (phase === "stopping" || phase === "stopped" || phase === "failed") {
      active = false;
      return "continue";
    }
    if (present && !active && phase === "running") {
      active = true;
      log.info("entering external drain");
      options.enterDrain();
    } else if (!present && active) {
      active = false;
      if (phase === "draining") {
        log.info("leaving external drain");
        options.leaveDrain();
      }
    }
    return "continue";
  };

  return startPolling(tick, options.intervalMs ?? 1000);
}
