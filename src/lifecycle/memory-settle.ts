/**
 * Gives memory back once a burst of work is over. Under load V8 grows its heap (the young
 * generation to its maximum, the old one with short-lived objects that outlived two scavenges)
 * and keeps it committed until a later major collection, which a quiet gateway may not run for a
 * long time: after 12,000 API turns from 50 sessions the gateway still held ~245 MB of RSS 20 s
 * later, with ~20 MB of heap live. When the event loop has been busy and then stays quiet for a
 * couple of seconds, two full collections (the second compacts what the first freed) let V8
 * return most of the old generation: ~170-215 MB a few seconds after that burst. They run only
 * while nothing else is happening.
 */
import { performance } from "node:perf_hooks";
import { getHeapStatistics, setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import type { Logger } from "pino";
import type { Watcher } from "./lifecycle-phase.js";

/** Event-loop utilisation over one interval from which the gateway counts as busy. */
const BUSY_UTILISATION = 0.5;
/** ... and under which it counts as quiet (an idle gateway's timers and file checks: ~0.02). */
const QUIET_UTILISATION = 0.1;
/** Quiet intervals in a row before collecting: a pause between two requests is not the end. */
const QUIET_INTERVALS = 2;

export interface MemorySettleOptions {
  logger: Logger;
  /** Default 1000 ms. */
  intervalMs?: number;
  /** Committed heap beyond the live heap below which nothing is collected; default 24 MB. */
  minSlackBytes?: number;
  /** One full collection; default V8's (see v8FullCollection). */
  collect?: () => void;
}

export function startMemorySettle(options: MemorySettleOptions): Watcher {
  const minSlack = options.minSlackBytes ?? 24 * 1024 * 1024;
  let collect = options.collect;
  let last = performance.eventLoopUtilization();
  let busy = false;
  let quietIntervals = 0;
  const timer = setInterval(() => {
    const now = performance.eventLoopUtilization();
    const utilisation = performance.eventLoopUtilization(now, last).utilization;
    last = now;
    if (utilisation >= BUSY_UTILISATION) busy = true;
    quietIntervals = utilisation < QUIET_UTILISATION ? quietIntervals + 1 : 0;
    if (!busy || quietIntervals < QUIET_INTERVALS) return;
    busy = false;
    const before = getHeapStatistics();
    if (before.total_heap_size - before.used_heap_size < minSlack) return;
    collect ??= v8FullCollection();
    const started = performance.now();
    collect();
    collect();
    options.logger.debug(
      {
        ms: Math.round(performance.now() - started),
        heapMbBefore: Math.round(before.total_heap_size / 1048576),
        heapMbAfter: Math.round(getHeapStatistics().total_heap_size / 1048576),
      },
      "quiet after a busy spell: heap collected",
    );
  }, options.intervalMs ?? 1000);
  timer.unref();
  return {
    stop: async () => clearInterval(timer),
  };
}

/**
 * V8's `gc()`, which Node exposes only with `--expose-gc` on its command line: the flag is set
 * just long enough to fetch the function from a fresh context (as Jest does for its leak check).
 */
export function v8FullCollection(): () => void {
  const exposed = (globalThis as { gc?: () => void }).gc;
  if (exposed) return exposed;
  setFlagsFromString("--expose-gc");
  try {
    return runInNewContext("gc") as () => void;
  } finally {
    setFlagsFromString("--no-expose-gc");
  }
}
