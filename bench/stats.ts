/** Small statistics helpers shared by the benchmarks. */

/** The p-th percentile (nearest rank) of an ascending array; NaN when empty. */
export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const index = Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1);
  return sorted[Math.max(0, index)]!;
}

/** The median of unsorted values. */
export function median(values: readonly number[]): number {
  return percentile(
    [...values].sort((a, b) => a - b),
    50,
  );
}

/** "min / median / max" of repeated runs, with `digits` decimals. */
export function spread(values: readonly number[], digits = 1): string {
  if (values.length === 0) return "n/a";
  const sorted = [...values].sort((a, b) => a - b);
  const f = (v: number) => v.toFixed(digits);
  if (sorted.length === 1) return f(sorted[0]!);
  return `${f(median(sorted))} (min ${f(sorted[0]!)}, max ${f(sorted[sorted.length - 1]!)}, n=${sorted.length})`;
}

/** A target line: `label  measured  (target < 3 ms: met|MISSED)`. */
export function verdict(measured: number, target: number, below: boolean): string {
  const met = below ? measured < target : measured > target;
  return `${below ? "<" : ">"} ${target}: ${met ? "met" : "MISSED"}`;
}
