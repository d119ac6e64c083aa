import { describe, expect, it } from "vitest";
import type { MisfirePolicy } from "../sessions/store.js";
import { MAX_CATCH_UP, planFire } from "./misfire.js";
import type { Timing } from "./timing.js";

const t = (iso: string) => Date.parse(iso);
const iso = (ms: number | null | undefined) =>
  ms === null || ms === undefined ? null : new Date(ms).toISOString();
const hourly: Timing = { kind: "every", expr: "1h", tz: null };
const cursor = t("2026-11-26T01:00:00Z");

function plan(misfire: MisfirePolicy, now: string, timing: Timing = hourly) {
  return planFire({ timing, misfire, nextFireAt: cursor }, t(now));
}

describe("misfire policy", () => {
  it("a slot fired within the grace is on time, whatever the policy", () => {
    for (const policy of ["once", "skip", "all"] as const) {
      const p = plan(policy, "2026-11-26T01:00:02Z");
      expect(iso(p.fire?.slot)).toBe("2026-11-26T01:00:00.000Z");
      expect(p.fire?.catchUp).toBe(false);
      expect(p.skipped).toBe(0);
      expect(iso(p.nextFireAt)).toBe("2026-11-26T02:00:00.000Z");
    }
  });

  // Down from before 01:00 until 03:40: three slots (01:00, 02:00, 03:00) were missed, the last
  // one by more than the grace (half the period).
  const later = "2026-11-26T03:40:00Z";

  it("once: runs the latest missed slot, late, and drops the others", () => {
    const p = plan("once", later);
    expect(iso(p.fire?.slot)).toBe("2026-11-26T03:00:00.000Z");
    expect(p.fire).toMatchObject({ catchUp: true, dropped: 2, lateMs: 40 * 60_000 });
    expect(iso(p.nextFireAt)).toBe("2026-11-26T04:00:00.000Z");
  });

  it("skip: runs none of them and moves on to the next slot", () => {
    const p = plan("skip", later);
    expect(p.fire).toBeNull();
    expect(p.skipped).toBe(3);
    expect(iso(p.nextFireAt)).toBe("2026-11-26T04:00:00.000Z");
  });

  it("skip: still runs the latest slot when it is within the grace", () => {
    const p = plan("skip", "2026-11-26T03:00:05Z");
    expect(iso(p.fire?.slot)).toBe("2026-11-26T03:00:00.000Z");
    expect(p.fire).toMatchObject({ catchUp: false, dropped: 2 });
    expect(p.skipped).toBe(2);
  });

  it("all: runs the oldest missed slot first, the next one after it", () => {
    const p = plan("all", later);
    expect(iso(p.fire?.slot)).toBe("2026-11-26T01:00:00.000Z");
    expect(p.fire).toMatchObject({ catchUp: true, dropped: 0 });
    expect(iso(p.nextFireAt)).toBe("2026-11-26T02:00:00.000Z");
  });

  it("all: is bounded, catching up only the latest slots", () => {
    const p = plan("all", "2026-11-28T01:30:00Z"); // 49 slots missed
    expect(p.fire?.dropped).toBe(49 - MAX_CATCH_UP);
    expect(iso(p.fire?.slot)).toBe(iso(t("2026-11-28T01:00:00Z") - (MAX_CATCH_UP - 1) * 3_600_000));
  });

  it("a one-shot missed beyond the grace: once runs it late, skip retires it unrun", () => {
    const at: Timing = { kind: "at", expr: "2026-11-26T01:00:00.000Z", tz: null };
    const once = plan("once", "2026-11-26T05:00:00Z", at);
    expect(once.fire).toMatchObject({ catchUp: true, dropped: 0 });
    expect(once.nextFireAt).toBeNull();
    const skip = plan("skip", "2026-11-26T05:00:00Z", at);
    expect(skip.fire).toBeNull();
    expect(skip.nextFireAt).toBeNull();
  });

  it("a cron job down over a day in Berlin: once runs the latest slot only", () => {
    const daily: Timing = { kind: "cron", expr: "0 8 * * *", tz: "Europe/Berlin" };
    const p = planFire(
      { timing: daily, misfire: "once", nextFireAt: t("2026-11-24T07:00:00Z") },
      t("2026-11-26T09:00:00Z"),
    );
    expect(iso(p.fire?.slot)).toBe("2026-11-26T07:00:00.000Z");
    expect(p.fire?.dropped).toBe(2);
    expect(iso(p.nextFireAt)).toBe("2026-11-27T07:00:00.000Z");
  });
});
