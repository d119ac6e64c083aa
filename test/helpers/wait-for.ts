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
 * Polls `predicate` until it returns a truthy value (a thrown error counts as "not yet") and
 * resolves with that value. Rejects naming `message` and the last error once `timeoutMs` has
 * passed, so a test waits for an effect with a bound instead of sleeping a fixed time.
 */
export async function waitFor<T>(
  predicate: () => T | Promise<T>,
  options: WaitForOptions = {},
): Promise<NonNullable<T>> {
  const { timeoutMs = 5000, intervalMs = 20, message = "condition" } = options;
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    try {
      const value = await predicate();
      if (value) return value as NonNullable<T>;
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
