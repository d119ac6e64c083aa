/** Polls `predicate` until it returns true (or a truthy promise), failing after `timeoutMs`. */
export async function waitFor(
  predicate: () => boolean | Promise<boolean>,
  options: { timeoutMs: number; intervalMs?: number; message?: string },
): Promise<void> {
  const deadline = Date.now() + options.timeoutMs;
  const interval = options.intervalMs ?? 20;
  for (;;) {
    if (await predicate()) return;
    if (Date.now() > deadline) {
      throw new Error(options.message ?? `condition not met within ${options.timeoutMs} ms`);
    }
    await new Promise((resolve) => setTimeout(resolve, interval));
  }
}
