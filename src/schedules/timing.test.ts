import { describe, expect, it } from "vitest";
import {
  countSlotsIn,
  lastSlotsIn,
  nextSlotAfter,
  parseAt,
  parseDuration,
  parseTiming,
  ScheduleInputError,
  type Timing,
} from "./timing.js";

const t = (iso: string) => Date.parse(iso);
const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());
const cron = (expr: string, tz: string): Timing => ({ kind: "cron", expr, tz });

/** The next `n` slots after `from`, as ISO strings. */
function slots(timing: Timing, from: string, n: number): string[] {
  const out: string[] = [];
  let at = t(from);
  for (let i = 0; i < n; i++) {
    const next = nextSlotAfter(timing, at, t(from));
    if (next === null) break;
    out.push(iso(next)!);
    at = next;
  }
  return out;
}

describe("durations", () => {
  it("reads 30s, 15m, 2h and 1d", () => {
    expect(parseDuration("30s")).toBe(30_000);
    expect(parseDuration("15m")).toBe(900_000);
    expect(parseDuration("2h")).toBe(7_200_000);
    expect(parseDuration("1d")).toBe(86_400_000);
  });

  it("refuses anything else with a message saying what to write", () => {
    for (const bad of ["", "15", "m", "1.5h", "2 hours", "-5m", "0s", "10x"]) {
      expect(() => parseDuration(bad), bad).toThrow(ScheduleInputError);
    }
    expect(() => parseDuration("2 hours")).toThrow(/like 30s, 15m, 2h/);
  });
});

describe("one-shot times", () => {
  const now = t("2026-11-26T10:00:00Z");

  it("reads +DURATION from now, UTC and offset ISO times, and local times in a zone", () => {
    expect(iso(parseAt("+2h", now, null))).toBe("2026-11-26T12:00:00.000Z");
    expect(iso(parseAt("2026-11-27T08:00:00Z", now, null))).toBe("2026-11-27T08:00:00.000Z");
    expect(iso(parseAt("2026-11-27T08:00:00+02:00", now, null))).toBe("2026-11-27T06:00:00.000Z");
    // 8:00 in Berlin in winter (CET, +01:00), and in New York in summer (EDT, -04:00).
    expect(iso(parseAt("2026-11-27T08:00", now, "Europe/Berlin"))).toBe("2026-11-27T07:00:00.000Z");
    expect(iso(parseAt("2027-07-01T08:00", now, "America/New_York"))).toBe(
      "2027-07-01T12:00:00.000Z",
    );
  });

  it("refuses a time in the past and text that is no time", () => {
    expect(() => parseAt("2026-11-26T09:00:00Z", now, null)).toThrow(/has passed/);
    expect(() => parseAt("tomorrow", now, null)).toThrow(ScheduleInputError);
  });
});

describe("parseTiming", () => {
  const now = t("2026-11-26T10:00:00Z");

  it("needs exactly one of cron, every and at", () => {
    expect(() => parseTiming({}, now)).toThrow(/exactly one/);
    expect(() => parseTiming({ cron: "* * * * *", every: "5m" }, now)).toThrow(/exactly one/);
  });

  it("an interval first fires one period from now", () => {
    const { timing, first } = parseTiming({ every: "15m" }, now);
    expect(timing).toEqual({ kind: "every", expr: "15m", tz: null });
    expect(iso(first)).toBe("2026-11-26T10:15:00.000Z");
  });

  it("refuses a bad cron expression and an unknown zone, naming them", () => {
    expect(() => parseTiming({ cron: "every day" }, now)).toThrow(/Invalid cron expression/);
    expect(() => parseTiming({ cron: "0 8 * * *", tz: "Mars/Olympus" }, now)).toThrow(
      /Unknown time zone "Mars\/Olympus"/,
    );
  });

  it("a cron expression keeps its zone", () => {
    const { timing, first } = parseTiming({ cron: "0 8 * * *", tz: "Europe/Berlin" }, now);
    expect(timing.tz).toBe("Europe/Berlin");
    expect(iso(first)).toBe("2026-11-27T07:00:00.000Z");
  });
});

describe("next fire of a cron expression across DST", () => {
  it("Europe/Berlin spring forward: 02:30 does not exist, the daily job runs at 03:00 that day", () => {
    expect(slots(cron("30 2 * * *", "Europe/Berlin"), "2026-03-28T12:00:00Z", 3)).toEqual([
      "2026-03-29T01:00:00.000Z", // 03:00 CEST, the first time after the gap
      "2026-03-30T00:30:00.000Z", // 02:30 CEST
      "2026-03-31T00:30:00.000Z",
    ]);
  });

  it("Europe/Berlin fall back: a daily 02:30 job runs once, an every-30-min job on both 02:30s", () => {
    expect(slots(cron("30 2 * * *", "Europe/Berlin"), "2026-10-24T12:00:00Z", 2)).toEqual([
      "2026-10-25T00:30:00.000Z", // 02:30 CEST; the second 02:30 (CET) does not run again
      "2026-10-26T01:30:00.000Z", // 02:30 CET
    ]);
    expect(slots(cron("*/30 * * * *", "Europe/Berlin"), "2026-10-25T00:10:00Z", 4)).toEqual([
      "2026-10-25T00:30:00.000Z", // 02:30 CEST
      "2026-10-25T01:00:00.000Z", // 02:00 CET
      "2026-10-25T01:30:00.000Z", // 02:30 CET
      "2026-10-25T02:00:00.000Z",
    ]);
  });

  it("America/New_York: 9:00 local is 14:00Z before the switch and 13:00Z after", () => {
    expect(slots(cron("0 9 * * *", "America/New_York"), "2026-03-07T00:00:00Z", 3)).toEqual([
      "2026-03-07T14:00:00.000Z",
      "2026-03-08T13:00:00.000Z",
      "2026-03-09T13:00:00.000Z",
    ]);
    expect(slots(cron("0 9 * * *", "America/New_York"), "2026-10-31T00:00:00Z", 3)).toEqual([
      "2026-10-31T13:00:00.000Z",
      "2026-11-01T14:00:00.000Z",
      "2026-11-02T14:00:00.000Z",
    ]);
  });

  it("the same expression fires at different instants in different zones", () => {
    const from = "2026-11-26T00:00:00Z";
    expect(slots(cron("0 8 * * *", "Europe/Berlin"), from, 1)).toEqual([
      "2026-11-26T07:00:00.000Z",
    ]);
    expect(slots(cron("0 8 * * *", "America/New_York"), from, 1)).toEqual([
      "2026-11-26T13:00:00.000Z",
    ]);
    expect(slots(cron("0 8 * * *", "UTC"), from, 1)).toEqual(["2026-11-26T08:00:00.000Z"]);
  });
});

describe("slots in a window", () => {
  const every: Timing = { kind: "every", expr: "2h", tz: null };
  const anchor = t("2026-11-26T00:00:00Z");

  it("an interval keeps its grid, anchored at the cursor", () => {
    expect(iso(nextSlotAfter(every, t("2026-11-26T05:00:00Z"), anchor))).toBe(
      "2026-11-26T06:00:00.000Z",
    );
    expect(iso(nextSlotAfter(every, t("2026-11-26T06:00:00Z"), anchor))).toBe(
      "2026-11-26T08:00:00.000Z",
    );
    expect(countSlotsIn(every, anchor, t("2026-11-26T05:00:00Z"), 100)).toBe(3);
    expect(lastSlotsIn(every, anchor, t("2026-11-26T05:00:00Z"), 2).map(iso)).toEqual([
      "2026-11-26T02:00:00.000Z",
      "2026-11-26T04:00:00.000Z",
    ]);
  });

  it("a cron expression counts and lists the slots of a window, bounded", () => {
    const hourly = cron("0 * * * *", "UTC");
    const from = t("2026-11-26T00:00:00Z");
    const to = t("2026-11-26T03:30:00Z");
    expect(countSlotsIn(hourly, from, to, 100)).toBe(4);
    expect(countSlotsIn(hourly, from, to, 2)).toBe(2);
    expect(lastSlotsIn(hourly, from, to, 2).map(iso)).toEqual([
      "2026-11-26T02:00:00.000Z",
      "2026-11-26T03:00:00.000Z",
    ]);
  });

  it("a one-shot has one slot, and none after it", () => {
    const at: Timing = { kind: "at", expr: "2026-11-26T12:00:00.000Z", tz: null };
    expect(iso(nextSlotAfter(at, t("2026-11-26T11:00:00Z"), 0))).toBe("2026-11-26T12:00:00.000Z");
    expect(nextSlotAfter(at, t("2026-11-26T12:00:00Z"), 0)).toBeNull();
  });
});
