/**
 * Polls `predicate` until it returns a truthy value (or a promise of one) and resolves with it.
 * Rejects after `timeoutMs` with `message` (or a generic one), so tests never hang and never
 * rely on fixed sleeps.
 */
export async function waitFor<T>(
  predicate: () => T | Promise<T>,
  options: { timeoutMs?: number; intervalMs?: number; message?: string } = {},
): Promise<NonNullable<T>> {
  const timeoutMs = options.timeoutMs ?? 5_000;
  const intervalMs = options.intervalMs ?? 10;
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    try {
      const value = await predicate();
      if (value) return value as NonNullable<T>;
    } catch (err) {
      lastError = err;
    }
    if (Date.now() >= deadline) {
      const reason = options.message ?? "condition not met";
      throw new Error(`waitFor timed out after ${timeoutMs} ms: ${reason}`, { cause: lastError });
    }
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}
