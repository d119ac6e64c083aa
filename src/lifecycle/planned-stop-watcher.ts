/**
 * Watches for `.planned_stop.json` naming this process and starts the same planned stop a
 * signal would. It is the only stop path where there are no POSIX signals (Windows), and a
 * cheap second path everywhere else.
 */
import type { Logger } from "pino";
import type { GatewayState } from "./lifecycle.js";
import type { Watcher } from "./lifecycle-phase.js";
import { startPolling } from "./lifecycle-phase.js";
import { matchPlannedStop, readPlannedStop, removePlannedStop } from "./markers.js";

export interface PlannedStopWatcherOptions {
  home: string;
  /** This process: pid and start time (epoch ms; null when unknown). */
  self: { pid: number; startTime: number | null };
  getPhase(): GatewayState;
  /** Called at most once, when a marker for this process is found while running. */
  onPlannedStop(): void;
  logger: Logger;
  /** Default 500 ms. */
  intervalMs?: number;
  now?: () => number;
}

/**
 * Polls for the planned-stop marker. Fires `onPlannedStop` once when the marker names this
 * pid (and start time, when both are known) while the gateway is running or draining, removes
 * the marker, and stops polling. Markers for other processes are left alone; stale or corrupt
 * markers are removed. Nothing happens while starting, stopping or stopped. File-system errors
 * are logged and polling goes on.
 */
export function startPlannedStopWatcher(options: PlannedStopWatcherOptions): Watcher {
  const now = options.now ?? Date.now;
  const log = options.logger;
  let fired = false;

  const tick = async (isStopped: () => boolean): Promise<"continue" | "done"> => {
    const phase = options.getPhase();
    if (phase !== "running" && phase !== "draining") return "continue";
    try {
      const read = await readPlannedStop(options.home);
      if (read.kind === "missing") return "continue";
      if (read.kind === "corrupt") {
        log.warn("removing unreadable planned-stop marker");
        await removePlannedStop(options.home);
        return "continue";
      }
      const match = matchPlannedStop(read.marker, options.self, now());
      if (match === "other") return "continue";
      await removePlannedStop(options.home);
      if (match === "stale") {
        log.info({ writtenAt: read.marker.written_at }, "removed stale planned-stop marker");
        return "continue";
      }
    } catch (error) {
      log.warn({ err: error }, "planned-stop marker check failed");
      return "continue";
    }
    if (isStopped() || fired) return "done";
    fired = true;
    log.info("planned stop requested through marker");
    options.onPlannedStop();
    return "done";
  };

  return startPolling(tick, options.intervalMs ?? 500);
}
