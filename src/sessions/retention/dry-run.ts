/**
 * A dry run does the work inside the method's transaction and then rolls it back by throwing
 * this, so what it reports is exactly what the real run would do at that moment.
 */
export class DryRunRollback<T> {
  constructor(readonly value: T) {}
}

/** Awaits a method's transaction; a dry run's rollback gives its counts back as the result. */
export async function settleDryRun<T>(run: Promise<T>): Promise<T> {
  try {
    return await run;
  } catch (err) {
    if (err instanceof DryRunRollback) return err.value as T;
    throw err;
  }
}
