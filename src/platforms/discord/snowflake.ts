/** Discord's ids (snowflakes): their order and the moment each was made. */

/** Snowflake order: longer is larger, then by digits. */
export function compareSnowflakes(a: string, b: string): number {
  return a.length - b.length || (a < b ? -1 : a > b ? 1 : 0);
}

/** The smallest snowflake of a moment (Discord epoch 2015-01-01), for "messages after then". */
export function snowflakeAt(ms: number): string {
  return ((BigInt(Math.max(ms, 1_420_070_400_000)) - 1_420_070_400_000n) << 22n).toString();
}

/** When a snowflake was made (ms since 1970). */
export function snowflakeTime(id: string): number {
  return Number(BigInt(id) >> 22n) + 1_420_070_400_000;
}
