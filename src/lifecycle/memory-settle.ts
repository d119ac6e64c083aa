/**
 * Gives memory back once a burst of work is over. Under load V8 grows its heap (the young
 * generation to its maximum, the old one with short-lived objects that outlived two scavenges)
 * and keeps it committed until a later major collection, which a quiet gateway may not run for a
 * long time: after 12,000 API turns from 50 sessions the gateway still held ~245 MB of RSS 20 s
 * later, with ~20 MB of heap live. When the event loop has been busy, then stays quiet for two
 * seconds with no turn in flight, one settle collects everything V8 can (docs/operations.md,
 * "Memory", has figures).
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
/**
 * V8 12 (Node 22) and later take `gc({ flavor: "last-resort" })`: every collection V8 can run,
 * which also shrinks the young generation and hands freed pages back to the system at once.
 * V8 11 (Node 20) does not know it (an options object it cannot read runs a mere scavenge there),
 * so it gets two plain collections (the second compacts what the first freed), and its young
 * generation keeps its grown size. Checked on Node 20.20, 22.23 and 24.21.
 */
const LAST_RESORT = Number(process.versions.v8.split(".")[0]) >= 12;
/**
 * Where V8 has no last-resort collection, quiet intervals in a row after the settle's collection
 * before one more. V8 11 shrinks the young generation after a collection that finds the
 * allocation rate low (under 1 MB/s), reckoned over at least the last five seconds of allocation,
 * counted from one collection to the next: so six seconds after the settle's.
 */
const FOLLOW_UP_QUIET_INTERVALS = 6;

export interface MemorySettleOptions {
  logger: Logger;
  /** False while work is in flight (turns waiting on the model leave the loop quiet). */
  isIdle(): boolean;
  /** Default 1000 ms. */
  intervalMs?: number;
  /**
   * Growth of V8's committed heap over its lowest point since the watcher started or last
   * collected, below which a busy spell is left alone (it left nothing much to give back).
   */
  minGrowthBytes?: number;
  /** Bytes V8 has committed for its heap; default V8's own figure. */
  committedHeap?: () => number;
  /** Event-loop utilisation since the previous call; default Node's. */
  sampleUtilisation?: () => number;
  /** Collects all it can, once per settle; default V8's (see v8FullCollection). */
  collect?: () => void;
  /**
   * Counts start-up as a busy spell (default true): it grows the heap like one, and an idle
   * gateway would otherwise keep what it left until its first busy spell.
   */
  afterStartUp?: boolean;
  /**
   * Collects once more, later in the same quiet spell, so that V8 11 shrinks its young
   * generation; default: where V8 has no last-resort collection (Node 20).
   */
  youngGenerationFollowUp?: boolean;
}

export function startMemorySettle(options: MemorySettleOptions): Watcher {
  const minGrowth = options.minGrowthBytes ?? 24 * 1024 * 1024;
  const committedHeap = options.committedHeap ?? v8CommittedHeap;
  // Committed, not used: V8 counts garbage as used until a collection has found it. The lowest
  // reading, not the first: V8 also shrinks the heap by itself, and growth counted from a higher
  // point would be too small (or negative) and skip a settle the heap needs.
  let baseline = committedHeap();
  const sample = options.sampleUtilisation ?? utilisationSampler();
  const followUp = options.youngGenerationFollowUp ?? !LAST_RESORT;
  let collect = options.collect;
  let busy = options.afterStartUp ?? true;
  /** Start-up's settle runs whatever the growth: the baseline was read after start-up. */
  let growthUnknown = busy;
  let quietIntervals = 0;
  /** Quiet intervals in a row since the settle's collection; null: no follow-up due. */
  let quietSinceSettle: number | null = null;
  /** The interval under way holds one of our own collections, which is not the gateway's work. */
  let collectedThisInterval = false;
  const timer = setInterval(() => {
    const utilisation = sample();
    const own = collectedThisInterval;
    collectedThisInterval = false;
    const before = committedHeap();
    baseline = Math.min(baseline, before);
    if (utilisation >= BUSY_UTILISATION && !own) busy = true;
    const quiet = utilisation < QUIET_UTILISATION || own;
    quietIntervals = quiet ? quietIntervals + 1 : 0;
    if (quietSinceSettle !== null) quietSinceSettle = quiet ? quietSinceSettle + 1 : 0;
    if (quietIntervals < QUIET_INTERVALS || !options.isIdle()) return;
    if (busy) {
      busy = false;
      if (!growthUnknown && before - baseline < minGrowth) return;
      growthUnknown = false;
      const collected = runCollection(before, "quiet after a busy spell: heap collected");
      quietSinceSettle = followUp && collected ? 0 : null;
    } else if (quietSinceSettle !== null && quietSinceSettle >= FOLLOW_UP_QUIET_INTERVALS) {
      quietSinceSettle = null;
      runCollection(
        before,
        "still quiet: heap collected again (V8 shrinks its young generation now)",
      );
    }
  }, options.intervalMs ?? 1000);

  /** Collects and logs how long it took; false when V8 cannot collect (then it stops trying). */
  function runCollection(before: number, message: string): boolean {
    try {
      collect ??= v8FullCollection();
      const started = performance.now();
      collect();
      collectedThisInterval = true;
      baseline = committedHeap();
      options.logger.debug(
        {
          ms: Math.round(performance.now() - started),
          heapMbBefore: Math.round(before / 1048576),
          heapMbAfter: Math.round(baseline / 1048576),
        },
        message,
      );
      return true;
    } catch (err) {
      // A runtime without V8's gc(): the gateway runs on, keeping what V8 keeps.
      clearInterval(timer);
      options.logger.warn({ err }, "cannot collect the heap after busy spells; not trying again");
      return false;
    }
  }
  timer.unref();
  return {
    stop: async () => clearInterval(timer),
  };
}

function utilisationSampler(): () => number {
  let last = performance.eventLoopUtilization();
  return () => {
    const now = performance.eventLoopUtilization();
    const { utilization } = performance.eventLoopUtilization(now, last);
    last = now;
    return utilization;
  };
}

/** Bytes V8 has committed for its heap, every space. */
function v8CommittedHeap(): number {
  return getHeapStatistics().total_heap_size;
}

type V8Gc = (options?: { type: "major"; execution: "sync"; flavor: "last-resort" }) => void;

/**
 * Everything V8 can collect, through its `gc()`: last-resort where V8 has it, else two plain
 * collections. Node exposes `gc()` only with `--expose-gc` on its command line: the flag is set
 * just long enough to fetch the function from a fresh context (as Jest does for its leak check).
 */
export function v8FullCollection(): () => void {
  const gc = fetchGc();
  if (LAST_RESORT) return () => gc({ type: "major", execution: "sync", flavor: "last-resort" });
  return () => {
    gc();
    gc();
  };
}

function fetchGc(): V8Gc {
  const exposed = (globalThis as { gc?: V8Gc }).gc;
  if (exposed) return exposed;
  setFlagsFromString("--expose-gc");
  try {
    const gc: unknown = runInNewContext("gc");
    if (typeof gc !== "function") throw new Error("V8's gc() is not available");
    return gc as V8Gc;
  } finally {
    setFlagsFromString("--no-expose-gc");
  }
}
