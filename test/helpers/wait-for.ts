/** Polls `predicate` until it returns a truthy value or `timeoutMs` passes (then throws). */
export async function waitFor<T>(
  predicate: () => T | Promise<T>,
  options: { timeoutMs?: number; intervalMs?: number; message?: string } = {},
): Promise<NonNullable<T>> {
  const deadline = Date.now() + (options.timeoutMs ?? 5000);
  let last: T | undefined;
  while (Date.now() < deadline) {
    last = await predicate();
    if (last) return last as NonNullable<T>;
    await new Promise((r) => setTimeout(r, options.intervalMs ?? 20));
  }
  throw new Error(`waitFor timed out${options.message ? `: ${options.message}` : ""} (last value: ${String(last)})`);
}
