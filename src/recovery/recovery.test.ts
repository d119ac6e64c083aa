import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createTempDir } from "../../test/helpers/temp-home.js";
import { SqliteStore } from "../sessions/sqlite-store.js";
import { markCutOff, RECENT_ACTIVITY_MS, recoverInterruptedWork } from "./recovery.js";

describe("start-up recovery", () => {
  let dir: ReturnType<typeof createTempDir>;
  let store: SqliteStore;
  let now: number;

  /** A session of chat `chatId` whose turn is still `running` (the process died in it). */
  async function runningTurn(chatId: string): Promise<string> {
    const key = `agent:main:test:dm:${chatId}`;
    const { item } = await store.acceptInbound({
      platform: "test",
      chatId,
      platformMessageId: `${chatId}-${now}`,
      sessionKey: key,
      text: "work",
      address: { platform: "test", chatId },
    });
    await store.startTurn({
      sessionKey: key,
      inboxId: item.id,
      userMessage: { role: "user", content: "work" },
    });
    return key;
  }

  beforeEach(() => {
    dir = createTempDir();
    now = 1_000_000_000;
    store = new SqliteStore(join(dir.path, "state.db"), { now: () => now });
  });
  afterEach(async () => {
    await store.close();
    dir.cleanup();
  });

  it("marks sessions whose turn was still running and closes those turns as interrupted", async () => {
    const key = await runningTurn("a");
    const report = await recoverInterruptedWork(store, { cleanShutdown: true, now });
    expect(report).toEqual({ interruptedTurns: 1, markedSessions: [key] });
    expect(await store.listRunningTurns()).toEqual([]);
    expect(await store.getSession(key)).toMatchObject({
      resumePending: true,
      resumeReason: "restart_interrupted",
      interruptCount: 1,
    });
  });

  it("without a clean shutdown also marks sessions active in the last 120 s with work left, and only those", async () => {
    const recent = `agent:main:test:dm:recent`;
    const old = `agent:main:test:dm:old`;
    const withUnansweredMessage = async (key: string) => {
      const session = await store.ensureSession(key, { platform: "test", chatId: key });
      await store.appendMessages(session.sessionId, null, [{ role: "user", content: "hi" }]);
    };
    await withUnansweredMessage(old);
    now += RECENT_ACTIVITY_MS + 1000;
    await withUnansweredMessage(recent);
    const report = await recoverInterruptedWork(store, { cleanShutdown: false, now });
    expect(report.markedSessions).toEqual([recent]);
    expect((await store.listResumePending()).map((s) => s.key)).toEqual([recent]);
  });

  it("a resumed turn cut off again by a crash counts toward suspension each time", async () => {
    let key = "";
    for (let crash = 1; crash <= 3; crash += 1) {
      key = await runningTurn("a");
      await recoverInterruptedWork(store, { cleanShutdown: false, now });
      now += 1000;
    }
    expect((await store.getSession(key))?.interruptCount).toBe(3);
  });

  it("a resumed turn cut off again by a stop counts toward suspension each time", async () => {
    const key = await runningTurn("a");
    await markCutOff(store, [key], "restart_timeout");
    await markCutOff(store, [key], "restart_timeout");
    await markCutOff(store, [key], "shutdown_timeout");
    expect(await store.getSession(key)).toMatchObject({
      resumePending: true,
      resumeReason: "shutdown_timeout",
      interruptCount: 3,
    });
  });
});
