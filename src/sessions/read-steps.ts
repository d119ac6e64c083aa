/**
 * A read of several dependent lookups written once for both engines: a generator yields each
 * single-row query (SQLite's `?` placeholders) and gets the row back, or undefined. SQLite runs
 * it synchronously inside its read (no other transaction can slip between the lookups), Postgres
 * awaits each lookup inside its snapshot.
 */

/** One single-row lookup. */
export interface RowLookup {
  sql: string;
  params: unknown[];
}

export type ReadSteps<T> = Generator<RowLookup, T, unknown>;

export function lookup(sql: string, ...params: unknown[]): RowLookup {
  return { sql, params };
}

export function runStepsSync<T>(steps: ReadSteps<T>, get: (q: RowLookup) => unknown): T {
  let next = steps.next();
  while (!next.done) next = steps.next(get(next.value));
  return next.value;
}

export async function runSteps<T>(
  steps: ReadSteps<T>,
  get: (q: RowLookup) => Promise<unknown>,
): Promise<T> {
  let next = steps.next();
  while (!next.done) next = steps.next(await get(next.value));
  return next.value;
}
