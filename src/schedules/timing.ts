/**
 * When a job fires: parsing what a user writes (`--cron EXPR [--tz ZONE]`, `--every 15m`,
 * `--at TIME`) and computing slots. Cron expressions and time zones are croner's; an interval is
 * a fixed grid anchored at the job's cursor; a one-shot has one slot.
 */
import { Cron, CronDate } from "croner";
import type { ScheduleKind } from "../sessions/store.js";

/** What a job's schedule is, as stored. */
export interface Timing {
  kind: ScheduleKind;
  /** Cron expression, interval as written (`15m`), or the one-shot instant (ISO, UTC). */
  expr: string;
  /** Time zone of a cron expression (always set for cron jobs). */
  tz: string | null;
}

/** Bad schedule input; the message says what to write instead. */
export class ScheduleInputError extends Error {}

const UNITS: Record<string, number> = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** `30s`, `15m`, `2h`, `1d` → milliseconds; at least one second. */
export function parseDuration(text: string): number {
  const match = /^\s*(\d+)\s*([smhd])\s*$/i.exec(text);
  if (!match) {
    throw new ScheduleInputError(
      `Invalid duration "${text}": write a whole number and a unit, like 30s, 15m, 2h or 1d.`,
    );
  }
  const ms = Number(match[1]) * UNITS[match[2]!.toLowerCase()]!;
  if (ms < 1000) throw new ScheduleInputError(`Invalid duration "${text}": at least 1s.`);
  return ms;
}

/** A time zone name the runtime knows (`Europe/Berlin`, `UTC`), or an error naming it. */
export function checkTimeZone(tz: string): string {
  try {
    return new Intl.DateTimeFormat("en-US", { timeZone: tz }).resolvedOptions().timeZone;
  } catch {
    throw new ScheduleInputError(
      `Unknown time zone "${tz}": use an IANA name like Europe/Berlin or UTC.`,
    );
  }
}

/** The zone of this machine, used for cron expressions and local times given without one. */
export function localTimeZone(): string {
  return Intl.DateTimeFormat().resolvedOptions().timeZone;
}

/**
 * A one-shot time: `+DURATION` (from now), an ISO time with an offset or `Z`, or a local ISO time
 * (`2026-12-24T18:00`) read in `tz`. Must lie in the future.
 */
export function parseAt(text: string, now: number, tz: string | null): number {
  const trimmed = text.trim();
  let at: number;
  if (trimmed.startsWith("+")) at = now + parseDuration(trimmed.slice(1));
  else if (/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?$/.test(trimmed)) {
    at = new CronDate(trimmed, tz ?? localTimeZone()).getTime();
  } else if (/^\d{4}-\d{2}-\d{2}T.*(Z|[+-]\d{2}:?\d{2})$/i.test(trimmed)) {
    at = Date.parse(trimmed);
  } else at = Number.NaN;
  if (!Number.isFinite(at)) {
    throw new ScheduleInputError(
      `Invalid time "${text}": write +DURATION (+2h), or an ISO time like 2026-12-24T18:00 ` +
        "(read in --tz, or this machine's zone) or 2026-12-24T17:00:00Z.",
    );
  }
  if (at <= now) throw new ScheduleInputError(`The time ${new Date(at).toISOString()} has passed.`);
  return at;
}

/** What a user asked for: exactly one of cron, every or at. */
export interface TimingInput {
  cron?: string | undefined;
  tz?: string | undefined;
  every?: string | undefined;
  at?: string | undefined;
}

/** Validates the input and returns the stored timing and its first slot. */
export function parseTiming(input: TimingInput, now: number): { timing: Timing; first: number } {
  const given = (["cron", "every", "at"] as const).filter((k) => input[k] !== undefined);
  if (given.length !== 1) {
    throw new ScheduleInputError("Give exactly one of --cron EXPR, --every DURATION or --at TIME.");
  }
  const tz = input.tz === undefined ? null : checkTimeZone(input.tz);
  let timing: Timing;
  if (input.cron !== undefined) {
    timing = { kind: "cron", expr: input.cron.trim(), tz: tz ?? localTimeZone() };
    cronOf(timing);
  } else if (input.every !== undefined) {
    parseDuration(input.every);
    if (tz) throw new ScheduleInputError("--tz applies to --cron and --at only.");
    timing = { kind: "every", expr: input.every.trim().toLowerCase(), tz: null };
    return { timing, first: now + parseDuration(timing.expr) };
  } else {
    const at = parseAt(input.at!, now, tz);
    timing = { kind: "at", expr: new Date(at).toISOString(), tz };
    return { timing, first: at };
  }
  const first = nextSlotAfter(timing, now, now);
  if (first === null) throw new ScheduleInputError(`"${timing.expr}" never fires again.`);
  return { timing, first };
}

const crons = new Map<string, Cron>();

/** The croner pattern of a cron timing (cached; croner only computes, nothing is scheduled). */
function cronOf(timing: Timing): Cron {
  const key = `${timing.tz ?? ""}\n${timing.expr}`;
  let cron = crons.get(key);
  if (!cron) {
    try {
      cron = new Cron(timing.expr, { timezone: timing.tz ?? "UTC", mode: "5-or-6-parts" });
    } catch (err) {
      throw new ScheduleInputError(
        `Invalid cron expression "${timing.expr}": ${(err as Error).message}`,
      );
    }
    crons.set(key, cron);
  }
  return cron;
}

/**
 * The first slot strictly after `afterMs`, or null when there is none. `anchor` is the grid of an
 * interval (the job's cursor): its slots are anchor + k·period.
 */
export function nextSlotAfter(timing: Timing, afterMs: number, anchor: number): number | null {
  switch (timing.kind) {
    case "at": {
      const at = Date.parse(timing.expr);
      return at > afterMs ? at : null;
    }
    case "every": {
      const period = parseDuration(timing.expr);
      if (anchor > afterMs) return anchor;
      return anchor + (Math.floor((afterMs - anchor) / period) + 1) * period;
    }
    case "cron":
      return cronOf(timing).nextRun(new Date(afterMs))?.getTime() ?? null;
  }
}

/** Up to `n` latest slots in [from, to], oldest first. */
export function lastSlotsIn(timing: Timing, from: number, to: number, n: number): number[] {
  if (to < from || n <= 0) return [];
  switch (timing.kind) {
    case "at": {
      const at = Date.parse(timing.expr);
      return at >= from && at <= to ? [at] : [];
    }
    case "every": {
      const period = parseDuration(timing.expr);
      const last = from + Math.floor((to - from) / period) * period;
      const slots: number[] = [];
      for (let s = last; s >= from && slots.length < n; s -= period) slots.unshift(s);
      return slots;
    }
    case "cron":
      // croner includes a run earlier in the reference's own second: +1 ms keeps `to` itself.
      return cronOf(timing)
        .previousRuns(n, new Date(to + 1))
        .map((d) => d.getTime())
        .filter((s) => s >= from && s <= to)
        .reverse();
  }
}

/** How many slots lie in [from, to], counting at most `cap` (then the answer is `cap`). */
export function countSlotsIn(timing: Timing, from: number, to: number, cap: number): number {
  if (to < from) return 0;
  if (timing.kind === "every") {
    return Math.min(cap, Math.floor((to - from) / parseDuration(timing.expr)) + 1);
  }
  let count = 0;
  let slot: number | null = from - 1;
  while (count < cap) {
    slot = nextSlotAfter(timing, slot, from);
    if (slot === null || slot > to) break;
    count += 1;
  }
  return count;
}

/** The usual distance between two slots (the grace for a late fire scales with it). */
export function periodOf(timing: Timing, around: number): number | null {
  if (timing.kind === "every") return parseDuration(timing.expr);
  if (timing.kind === "at") return null;
  const a = nextSlotAfter(timing, around, around);
  const b = a === null ? null : nextSlotAfter(timing, a, around);
  return a === null || b === null ? null : b - a;
}

/** A short human description: `every 15m`, `cron "0 8 * * *" (Europe/Berlin)`, `at 2026-...Z`. */
export function describeTiming(timing: Timing): string {
  if (timing.kind === "every") return `every ${timing.expr}`;
  if (timing.kind === "at") return `once at ${timing.expr}`;
  return `cron "${timing.expr}" (${timing.tz ?? "UTC"})`;
}
