import { describe, expect, it } from "vitest";
import type { ScheduleJob } from "../sessions/store.js";
import { fireMessage, formatDuration, jobNameOfSession, jobSessionKey } from "./fire-message.js";

const SLOT = Date.parse("2026-11-26T08:00:00Z");
const job = {
  name: "daily",
  prompt: "Summarise my inbox.",
  sessionKey: jobSessionKey("daily"),
  chat: null,
} as unknown as ScheduleJob;

describe("a fire as the runner receives it", () => {
  it("is keyed by the job's name and the slot, in the job's own session, with no chat", () => {
    const message = fireMessage(job, { slot: SLOT, lateMs: 20, dropped: 0, catchUp: false });
    expect(message).toMatchObject({
      platform: "schedule",
      chatId: "daily",
      platformMessageId: "2026-11-26T08:00:00.000Z",
      sessionKey: "agent:main:schedule:daily",
      address: { platform: "schedule", chatId: "daily" },
    });
    expect(message.text).toBe(
      '[Scheduled task "daily", due 2026-11-26T08:00:00.000Z]\nSummarise my inbox.',
    );
    expect(jobNameOfSession(message.sessionKey)).toBe("daily");
    expect(jobNameOfSession("agent:main:telegram:dm:1")).toBeNull();
  });

  it("tells the model how late a catch-up run is and what was missed", () => {
    const late = fireMessage(job, { slot: SLOT, lateMs: 3_725_000, dropped: 2, catchUp: true });
    expect(late.text).toMatch(/this is a catch-up run, 1 h 2 min late/);
    expect(late.text).toMatch(/2 earlier runs were missed and will not run\./);
    const skipped = fireMessage(job, { slot: SLOT, lateMs: 0, dropped: 1, catchUp: false });
    expect(skipped.text).toMatch(/1 earlier run was skipped \(misfire skip\)/);
    expect(skipped.text).not.toMatch(/catch-up/);
  });

  it("formats durations for people", () => {
    expect(formatDuration(7_000)).toBe("7 s");
    expect(formatDuration(724_000)).toBe("12 min 4 s");
    expect(formatDuration(3 * 86_400_000 + 3_600_000)).toBe("3 d 1 h");
  });
});
