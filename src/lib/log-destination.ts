/**
 * A log destination that coalesces: the lines logged in one turn of the event loop go out in one
 * synchronous write at its end (setImmediate), not one write each. Under load every finished
 * turn logs a line, and a write per line was ~4% of the gateway's CPU (issue 42, --cpu-prof).
 *
 * What a crash must not lose is not held back: a line at warn or above is written at once, with
 * everything before it, and whatever waits is written when the process exits (process.exit, a
 * signal handled to the end, an uncaught exception). Only SIGKILL or a native abort can lose
 * lines, and only the info lines of the current turn of the event loop.
 */
import type { DestinationStream } from "pino";

/** pino's level of warn; pino writes `{"level":NN,` first on every line. */
const WARN = 40;

/** What the lines are handed to: a pino destination that writes synchronously (SonicBoom). */
export interface SyncDestination {
  write(text: string): unknown;
}

export interface CoalescingDestination extends DestinationStream {
  /** Writes what waits, now. */
  flushSync(): void;
  /** Writes what waits, then calls back (pino's logger.flush). */
  flush(done?: (err?: Error) => void): void;
}

export function coalescingDestination(target: SyncDestination): CoalescingDestination {
  let pending: string[] = [];
  let scheduled = false;
  const flushSync = () => {
    scheduled = false;
    if (pending.length === 0) return;
    const text = pending.length === 1 ? pending[0]! : pending.join("");
    pending = [];
    target.write(text);
  };
  process.once("exit", flushSync);
  return {
    write(line: string) {
      pending.push(line);
      if (urgent(line)) flushSync();
      else if (!scheduled) {
        scheduled = true;
        setImmediate(flushSync);
      }
    },
    flushSync,
    flush(done) {
      flushSync();
      done?.();
    },
  };
}

/** At warn or above, or not a pino line at all (then nothing is assumed: written at once). */
function urgent(line: string): boolean {
  if (!line.startsWith('{"level":')) return true;
  const level = Number.parseInt(line.slice(9, 12), 10);
  return !(level < WARN);
}
