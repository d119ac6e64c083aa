import { describe, expect, it } from "vitest";
import { planResume, type ResumeCandidate } from "./resume-planner.js";

const NOW = 10_000_000;
const HOUR = 3_600_000;
const origin = { platform: "telegram", chatId: "42" };

function session(overrides: Partial<ResumeCandidate> = {}): ResumeCandidate {
  return {
    key: "agent:main:telegram:dm:42",
    resumeReason: "restart_timeout",
    resumeMarkedAt: NOW - 1000,
    interruptCount: 1,
    suspended: false,
    origin,
    ...overrides,
  };
}

function plan(sessions: ResumeCandidate[], recentBoots: number[] = []) {
  return planResume({ sessions, now: NOW, freshnessMs: HOUR, recentBoots });
}

describe("resume planner", () => {
  it("resumes drain-timeout and crash-recovery sessions", () => {
    const result = plan([
      session({ key: "a", resumeReason: "restart_timeout" }),
      session({ key: "b", resumeReason: "shutdown_timeout" }),
      session({ key: "c", resumeReason: "restart_interrupted" }),
    ]);
    expect(result.resume.map((s) => s.key)).toEqual(["a", "b", "c"]);
    expect(result.countsAsBoot).toBe(true);
    expect(result.breakerTripped).toBe(false);
  });

  it("skips stale sessions outside the freshness window (reset on next message)", () => {
    const result = plan([session({ resumeMarkedAt: NOW - HOUR - 1 })]);
    expect(result.resume).toEqual([]);
    expect(result.stale.map((s) => s.key)).toEqual(["agent:main:telegram:dm:42"]);
  });

  it("a freshness window of 0 never resumes, even a session marked this very millisecond or later", () => {
    const result = planResume({
      sessions: [
        session({ key: "now", resumeMarkedAt: NOW }),
        session({ key: "clock stepped back", resumeMarkedAt: NOW + 1000 }),
      ],
      now: NOW,
      freshnessMs: 0,
      recentBoots: [],
    });
    expect(result.resume).toEqual([]);
    expect(result.stale.map((s) => s.key)).toEqual(["now", "clock stepped back"]);
  });

  it("falls back to updatedAt when the mark time is unknown", () => {
    expect(plan([session({ resumeMarkedAt: null, updatedAt: NOW - 5 })]).resume).toHaveLength(1);
    expect(plan([session({ resumeMarkedAt: null })]).stale).toHaveLength(1);
  });

  it("skips suspended sessions", () => {
    const result = plan([session({ suspended: true })]);
    expect(result.resume).toEqual([]);
    expect(result.skipped).toEqual([
      { key: "agent:main:telegram:dm:42", reason: "already_suspended" },
    ]);
  });

  it("skips sessions without an origin chat", () => {
    expect(plan([session({ origin: null })]).skipped).toEqual([
      { key: "agent:main:telegram:dm:42", reason: "no_origin" },
    ]);
  });

  it("skips reasons that do not resume by themselves", () => {
    const result = plan([
      session({ resumeReason: "queued_during_stop" }),
      session({ key: "n", resumeReason: null }),
    ]);
    expect(result.resume).toEqual([]);
    expect(result.skipped.map((s) => s.reason)).toEqual([
      "reason_not_resumable",
      "reason_not_resumable",
    ]);
  });

  it("suspends a session interrupted by three restarts in a row", () => {
    const result = plan([
      session({ interruptCount: 3 }),
      session({ key: "two", interruptCount: 2 }),
    ]);
    expect(result.suspend.map((s) => s.key)).toEqual(["agent:main:telegram:dm:42"]);
    expect(result.resume.map((s) => s.key)).toEqual(["two"]);
  });

  it("trips the restart-loop breaker on the third boot with resumable sessions within 60 s: holds them back", () => {
    const result = plan([session()], [NOW - 50_000, NOW - 20_000]);
    expect(result.breakerTripped).toBe(true);
    expect(result.resume).toEqual([]);
    expect(result.held.map((s) => s.key)).toEqual(["agent:main:telegram:dm:42"]);
    expect(result.countsAsBoot).toBe(true);
  });

  it("holds a session due for suspension back with the rest while the breaker is tripped", () => {
    const result = plan(
      [
        session({ key: "looping", interruptCount: 3 }),
        session({ key: "stale", interruptCount: 3, resumeMarkedAt: NOW - HOUR - 1 }),
        session({ key: "other" }),
      ],
      [NOW - 50_000, NOW - 20_000],
    );
    expect(result.held.map((s) => s.key)).toEqual(["other", "looping"]);
    // One that could not resume anyway is suspended as before.
    expect(result.suspend.map((s) => s.key)).toEqual(["stale"]);
    // Also when it is the only one: the third boot of a loop trips the breaker.
    const alone = plan([session({ interruptCount: 3 })], [NOW - 50_000, NOW - 20_000]);
    expect(alone.breakerTripped).toBe(true);
    expect(alone.suspend).toEqual([]);
    expect(alone.held).toHaveLength(1);
  });

  it("does not trip the breaker for boots older than the window", () => {
    const result = plan([session()], [NOW - 120_000, NOW - 61_000, NOW - 20_000]);
    expect(result.breakerTripped).toBe(false);
    expect(result.resume).toHaveLength(1);
  });

  it("a boot without resumable sessions does not count toward the breaker", () => {
    const result = plan([session({ origin: null })], [NOW - 5000, NOW - 3000]);
    expect(result.countsAsBoot).toBe(false);
    expect(result.breakerTripped).toBe(false);
  });
});
