import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createTempDir } from "../../test/helpers/temp-home.js";
import type { ChatAddress } from "../contract/platform.js";
import { SqliteStore } from "../sessions/sqlite-store.js";
import { RECENT_ACTIVITY_MS, recoverInterruptedWork } from "./recovery.js";

const ADDRESS: ChatAddress = { platform: "telegram", chatId: "1" };
const NOW = 1_800_000_000_000;

describe("recoverInterruptedWork reads the record", () => {
  let dir: ReturnType<typeof createTempDir>;
  let store: SqliteStore;
  let clock: number;

  beforeEach(() => {
    dir = createTempDir();
    clock = NOW - 10_000;
    store = new SqliteStore(join(dir.path, "state.db"), { now: () => clock });
  });

  afterEach(async () => {
    await store.close();
    dir.cleanup();
  });

  /** A session with one turn: left running (cut off), or finished with an answer. */
  async function sessionWithTurn(key: string, ending: "running" | "answered" | "unanswered") {
    await store.ensureSession(key, ADDRESS);
    const turn = await store.startTurn({
      sessionKey: key,
      inboxId: null,
      userMessage: { role: "user", content: "hi" },
    });
    if (ending === "answered") {
      await store.finishTurn({
        turnId: turn.id,
        state: "done",
        finalMessage: { role: "assistant", content: "hello" },
        reply: null,
      });
    } else if (ending === "unanswered") {
      await store.finishTurn({
        turnId: turn.id,
        state: "interrupted",
        finalMessage: null,
        reply: null,
      });
    }
    return turn;
  }

  it("marks the turns left running as interrupted and their sessions resume-pending", async () => {
    await sessionWithTurn("a", "running");
    const report = await recoverInterruptedWork(store, { cleanShutdown: true, now: NOW });
    expect(report).toEqual({ interruptedTurns: 1, markedSessions: ["a"] });
    expect(await store.listRunningTurns()).toEqual([]);
    const session = await store.getSession("a");
    expect(session).toMatchObject({
      resumePending: true,
      resumeReason: "restart_interrupted",
      interruptCount: 1,
    });
  });

  it("without a clean shutdown, marks a recently active session whose transcript is unfinished", async () => {
    await sessionWithTurn("a", "unanswered");
    const report = await recoverInterruptedWork(store, { cleanShutdown: false, now: NOW });
    expect(report.markedSessions).toEqual(["a"]);
  });

  it("does not count a restart against a recently active session whose last turn answered", async () => {
    await sessionWithTurn("a", "answered");
    for (let boot = 0; boot < 3; boot++) {
      const report = await recoverInterruptedWork(store, { cleanShutdown: false, now: NOW });
      expect(report.markedSessions).toEqual([]);
    }
    expect(await store.getSession("a")).toMatchObject({ resumePending: false, interruptCount: 0 });
  });

  it("leaves sessions alone after a clean shutdown or when their activity is older than 120 s", async () => {
    await sessionWithTurn("a", "unanswered");
    expect(
      (await recoverInterruptedWork(store, { cleanShutdown: true, now: NOW })).markedSessions,
    ).toEqual([]);
    const later = NOW + RECENT_ACTIVITY_MS;
    expect(
      (await recoverInterruptedWork(store, { cleanShutdown: false, now: later })).markedSessions,
    ).toEqual([]);
  });

  it("survives a crash in the middle of recovery: the next start still resumes the session", async () => {
    await sessionWithTurn("a", "running");
    const crash = () => {
      throw new Error("killed mid-recovery");
    };
    await expect(
      recoverInterruptedWork(store, { cleanShutdown: true, now: NOW, crashPoint: crash }),
    ).rejects.toThrow("killed mid-recovery");
    // Long after: the 120 s rule cannot help, only the record can.
    const later = NOW + 10 * RECENT_ACTIVITY_MS;
    const report = await recoverInterruptedWork(store, { cleanShutdown: false, now: later });
    expect(report.interruptedTurns).toBe(1);
    expect(await store.listRunningTurns()).toEqual([]);
    expect(await store.getSession("a")).toMatchObject({ resumePending: true, interruptCount: 1 });
  });
});
