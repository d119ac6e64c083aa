/** The store contract for scheduled jobs, on every implementation (see store.test.ts). */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { storeHarnesses } from "../../test/helpers/store-harness.js";
import type { InboundMessage } from "../contract/platform.js";
import {
  ScheduleChangedError,
  type ScheduleJobInput,
  ScheduleNameTakenError,
  type Store,
} from "./store.js";

const SLOT = Date.parse("2026-11-26T08:00:00Z");
const NEXT = Date.parse("2026-11-27T08:00:00Z");

function jobInput(overrides: Partial<ScheduleJobInput> = {}): ScheduleJobInput {
  return {
    name: "daily",
    kind: "cron",
    expr: "0 8 * * *",
    tz: "UTC",
    prompt: "summarise",
    sessionKey: "agent:main:schedule:daily",
    chat: { platform: "telegram", chatId: "42" },
    misfire: "once",
    nextFireAt: SLOT,
    createdBy: "cli",
    ...overrides,
  };
}

function fire(slot = SLOT): InboundMessage {
  return {
    platform: "schedule",
    chatId: "daily",
    platformMessageId: new Date(slot).toISOString(),
    sessionKey: "agent:main:schedule:daily",
    text: "summarise",
    address: { platform: "telegram", chatId: "42" },
  };
}

describe.each(storeHarnesses())("the $name store: scheduled jobs", (harness) => {
  let store: Store;

  beforeEach(async () => {
    await harness.setup();
    store = await harness.open(() => SLOT + 1000);
  });
  afterEach(async () => {
    await store.close();
    await harness.teardown();
  });

  it("stores a job once per name", async () => {
    const job = await store.createScheduleJob(jobInput());
    expect(job).toMatchObject({ name: "daily", paused: false, nextFireAt: SLOT, failures: 0 });
    expect(job.chat).toEqual({ platform: "telegram", chatId: "42" });
    await expect(store.createScheduleJob(jobInput())).rejects.toBeInstanceOf(
      ScheduleNameTakenError,
    );
    expect(await store.listScheduleJobs()).toHaveLength(1);
  });

  it("commits a fire's inbox row and the job's new cursor together", async () => {
    const job = await store.createScheduleJob(jobInput());
    const advance = {
      jobId: job.id,
      expectedNextFireAt: SLOT,
      firedSlot: SLOT,
      lateMs: 1000,
      nextFireAt: NEXT,
    };
    const { accepted, item } = await store.acceptInbound(fire(), advance);
    expect(accepted).toBe(true);
    expect(item).toMatchObject({ platform: "schedule", chatId: "daily", state: "pending" });
    expect(await store.getScheduleJob("daily")).toMatchObject({
      nextFireAt: NEXT,
      lastFireAt: SLOT,
      lastFiredLateMs: 1000,
    });
    expect(await store.hasOpenInbox("schedule", "daily")).toBe(true);
  });

  it("a fire planned from a stale cursor stores nothing: no second row for the slot", async () => {
    const job = await store.createScheduleJob(jobInput());
    const advance = {
      jobId: job.id,
      expectedNextFireAt: SLOT,
      firedSlot: SLOT,
      lateMs: 0,
      nextFireAt: NEXT,
    };
    await store.acceptInbound(fire(), advance);
    // A second pass that read the job before the first fire committed.
    await expect(store.acceptInbound(fire(), advance)).rejects.toBeInstanceOf(ScheduleChangedError);
    expect(await store.listOpenInbox()).toHaveLength(1);
    expect((await store.getScheduleJob("daily"))?.nextFireAt).toBe(NEXT);
  });

  it("a paused or deleted job does not fire, and nothing is stored", async () => {
    const job = await store.createScheduleJob(jobInput());
    const advance = {
      jobId: job.id,
      expectedNextFireAt: SLOT,
      firedSlot: SLOT,
      lateMs: 0,
      nextFireAt: NEXT,
    };
    await store.pauseScheduleJob("daily", "by hand");
    await expect(store.acceptInbound(fire(), advance)).rejects.toBeInstanceOf(ScheduleChangedError);
    await store.deleteScheduleJob("daily");
    await expect(store.acceptInbound(fire(), advance)).rejects.toBeInstanceOf(ScheduleChangedError);
    expect(await store.listOpenInbox()).toHaveLength(0);
    expect(await store.listSessions()).toHaveLength(0);
  });

  it("a one-shot is gone once its fire is stored", async () => {
    const job = await store.createScheduleJob(jobInput({ kind: "at", expr: "x" }));
    await store.acceptInbound(fire(), {
      jobId: job.id,
      expectedNextFireAt: SLOT,
      firedSlot: SLOT,
      lateMs: 0,
      nextFireAt: null,
    });
    expect(await store.getScheduleJob("daily")).toBeNull();
    expect(await store.listOpenInbox()).toHaveLength(1);
  });

  it("skipped slots move the cursor without a fire, and keep the last fire", async () => {
    const job = await store.createScheduleJob(jobInput());
    expect(await store.skipScheduleSlots(job.id, SLOT, NEXT)).toBe(true);
    expect(await store.skipScheduleSlots(job.id, SLOT, NEXT)).toBe(false);
    expect(await store.getScheduleJob("daily")).toMatchObject({
      nextFireAt: NEXT,
      lastFireAt: null,
    });
    expect(await store.listOpenInbox()).toHaveLength(0);
  });

  it("three failed runs in a row pause a job; a success in between resets the streak", async () => {
    await store.createScheduleJob(jobInput());
    await store.recordScheduleRun("daily", false, 3);
    await store.recordScheduleRun("daily", true, 3);
    await store.recordScheduleRun("daily", false, 3);
    const second = await store.recordScheduleRun("daily", false, 3);
    expect(second).toMatchObject({ pausedNow: false, job: { failures: 2, paused: false } });
    const third = await store.recordScheduleRun("daily", false, 3);
    expect(third).toMatchObject({ pausedNow: true, job: { failures: 3, paused: true } });
    expect(third?.job.pausedReason).toMatch(/3 failed runs/);
    const resumed = await store.resumeScheduleJob("daily", NEXT);
    expect(resumed).toMatchObject({ paused: false, failures: 0, nextFireAt: NEXT });
    expect(await store.recordScheduleRun("gone", false, 3)).toBeNull();
  });

  it("a new job under a used name starts a fresh transcript, not the earlier job's", async () => {
    const first = await store.createScheduleJob(jobInput());
    await store.acceptInbound(fire(), {
      jobId: first.id,
      expectedNextFireAt: SLOT,
      firedSlot: SLOT,
      lateMs: 0,
      nextFireAt: NEXT,
    });
    const before = await store.getSession("agent:main:schedule:daily");
    const turn = await store.startTurn({
      sessionKey: "agent:main:schedule:daily",
      inboxId: null,
      userMessage: { role: "user", content: "telegram:42's private task" },
      origin: null,
    });
    await store.finishTurn({ turnId: turn.id, state: "done", finalMessage: null, reply: null });
    expect(await store.loadTranscript(before!.sessionId)).toHaveLength(1);

    // Deleted, and the name taken again for another chat's job.
    await store.deleteScheduleJob("daily");
    await store.createScheduleJob(jobInput({ chat: { platform: "telegram", chatId: "7" } }));
    const after = await store.getSession("agent:main:schedule:daily");
    expect(after?.sessionId).not.toBe(before!.sessionId);
    expect(await store.loadTranscript(after!.sessionId)).toEqual([]);
  });
});
