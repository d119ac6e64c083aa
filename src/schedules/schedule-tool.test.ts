import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createTempDir } from "../../test/helpers/temp-home.js";
import type { ChatAddress } from "../contract/platform.js";
import { SqliteStore } from "../sessions/sqlite-store.js";
import { ScheduleBook } from "./book.js";
import { createScheduleTool } from "./schedule-tool.js";

const NOW = Date.parse("2026-11-26T08:00:00Z");
const alice: ChatAddress = { platform: "telegram", chatId: "100" };
const bob: ChatAddress = { platform: "telegram", chatId: "200" };

describe("the schedule tool", () => {
  let dir: ReturnType<typeof createTempDir>;
  let store: SqliteStore;
  let book: ScheduleBook;

  beforeEach(() => {
    dir = createTempDir();
    store = new SqliteStore(join(dir.path, "state.db"), { now: () => NOW });
    book = new ScheduleBook(store, () => NOW);
  });
  afterEach(async () => {
    await store.close();
    dir.cleanup();
  });

  const tool = createScheduleTool(
    () => book,
    () => NOW,
  );
  const call = (chat: ChatAddress | null, args: Record<string, unknown>) =>
    tool.execute(args, { cwd: dir.path, signal: new AbortController().signal, chat });

  it("a turn sees and manages only the tasks that report to its own chat", async () => {
    const created = await call(alice, {
      action: "create",
      name: "alice-daily",
      every: "1h",
      prompt: "private reminder",
    });
    expect(created.isError).toBe(false);
    await book.create({ name: "ops", every: "1h", prompt: "ops check", createdBy: "cli" });

    const bobList = await call(bob, { action: "list" });
    expect(bobList.output).not.toContain("alice-daily");
    expect(bobList.output).not.toContain("ops");
    for (const action of ["pause", "resume", "delete"]) {
      const out = await call(bob, { action, name: "alice-daily" });
      expect(out.isError).toBe(true);
      expect(out.output).toContain('no scheduled task named "alice-daily"');
    }
    const job = await store.getScheduleJob("alice-daily");
    expect(job?.paused).toBe(false);

    // Its own chat still lists and manages it; a turn without a chat sees the chatless task.
    expect((await call(alice, { action: "list" })).output).toContain("alice-daily");
    expect((await call(alice, { action: "list" })).output).not.toContain("ops:");
    expect((await call(null, { action: "list" })).output).toContain("ops:");
    expect((await call(null, { action: "list" })).output).not.toContain("alice-daily");
    expect((await call(alice, { action: "pause", name: "alice-daily" })).isError).toBe(false);
    expect((await store.getScheduleJob("alice-daily"))?.paused).toBe(true);
    expect((await call(alice, { action: "delete", name: "alice-daily" })).isError).toBe(false);
    expect(await store.getScheduleJob("alice-daily")).toBeNull();
  });
});
