/**
 * Budget periods: calendar days and months in the gateway's time zone, as epoch-ms bounds. A
 * day across a daylight-saving change is 23 or 25 hours long; its bounds are still local midnights.
 */
export type BudgetPeriod = "day" | "month";

export interface PeriodBounds {
  /** Local midnight the period starts at (inclusive). */
  start: number;
  /** Local midnight the next period starts at (exclusive). */
  end: number;
}

const formatters = new Map<string, Intl.DateTimeFormat>();

function formatter(timeZone: string): Intl.DateTimeFormat {
  let f = formatters.get(timeZone);
  if (!f) {
    f = new Intl.DateTimeFormat("en-US", {
      timeZone,
      hourCycle: "h23",
      year: "numeric",
      month: "numeric",
      day: "numeric",
      hour: "numeric",
      minute: "numeric",
      second: "numeric",
    });
    formatters.set(timeZone, f);
  }
  return f;
}

/** The wall-clock fields of `at` in `timeZone`. */
function localFields(at: number, timeZone: string): Record<string, number> {
  const fields: Record<string, number> = {};
  for (const part of formatter(timeZone).formatToParts(new Date(at))) {
    if (part.type !== "literal") fields[part.type] = Number(part.value);
  }
  return fields;
}

/** How far `timeZone`'s wall clock is ahead of UTC at `at`, in ms. */
function offsetAt(at: number, timeZone: string): number {
  const f = localFields(at, timeZone);
  const wall = Date.UTC(f.year!, f.month! - 1, f.day!, f.hour!, f.minute!, f.second!);
  return wall - Math.floor(at / 1000) * 1000;
}

/** The instant of local midnight on the given calendar date (month 1-12, may overflow). */
export function localMidnight(year: number, month: number, day: number, timeZone: string): number {
  const wall = Date.UTC(year, month - 1, day);
  // Twice: the offset at the guess may differ from the offset at the answer (a DST change).
  let at = wall - offsetAt(wall, timeZone);
  at = wall - offsetAt(at, timeZone);
  return at;
}

export function periodBounds(at: number, period: BudgetPeriod, timeZone: string): PeriodBounds {
  const f = localFields(at, timeZone);
  if (period === "day") {
    return {
      start: localMidnight(f.year!, f.month!, f.day!, timeZone),
      end: localMidnight(f.year!, f.month!, f.day! + 1, timeZone),
    };
  }
  return {
    start: localMidnight(f.year!, f.month!, 1, timeZone),
    end: localMidnight(f.year!, f.month! + 1, 1, timeZone),
  };
}

/** `2026-11-29 00:00` in `timeZone`: how a period's end is shown. */
export function localTimeText(at: number, timeZone: string): string {
  const f = localFields(at, timeZone);
  const two = (n: number) => String(n).padStart(2, "0");
  return `${f.year}-${two(f.month!)}-${two(f.day!)} ${two(f.hour!)}:${two(f.minute!)}`;
}
