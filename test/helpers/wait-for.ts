import { setTimeout as sleep } from "node:timers/promises";

/** Options for {@link waitFor}. */
export interface WaitForOptions {
  /** Give up after this long (default 5000 ms). */
  timeoutMs?: number;
  /** Time between two checks (default 20 ms). */
  intervalMs?: number;
  /** Said in the error when the wait times out. */
  message?: string;
}

/**
 * Polls `predicate` until it returns true (a thrown error counts as "not yet"), then resolves.
 * Rejects with an error naming `message` and the last thrown error once `timeoutMs` has passed,
 * so a test waits for an effect with a bound instead of sleeping a fixed time.
 */
export async function waitFor(
  predicate: () => boolean | Promise<boolean>,
  options: WaitForOptions = {},
): Promise<void> {
  const { timeoutMs = 5000, intervalMs = 20, message = "condition" } = options;
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    try {
      if (await predicate()) return;
      lastError = undefined;
    } catch (error) {
      lastError = error;
    }
    if (Date.now() >= deadline) {
      const detail = lastError instanceof Error ? ` (last error: ${lastError.message})` : "";
      throw new Error(`waitFor timed out after ${timeoutMs} ms: ${message}${detail}`);
    }
    await sleep(intervalMs);
  }
}
