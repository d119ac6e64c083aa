/** What only the SQLite store does: group commit, WAL durability, online backup to a file. */
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createTempDir } from "../../test/helpers/temp-home.js";
import type { InboundMessage } from "../platforms/platform.js";
import { openSqliteDatabase } from "./sqlite-database.js";
import { MIGRATIONS } from "./sqlite-migrations.js";
import { SqliteStore } from "./sqlite-store.js";

function inbound(overrides: Partial<InboundMessage> = {}): InboundMessage {
  return {
    platform: "telegram",
    chatId: "42",
    platformMessageId: "1",
    sessionKey: "agent:main:telegram:dm:42",
    text: "hello",
    address: { platform: "telegram", chatId: "42", replyToMessageId: "1" },
    ...overrides,
  };
}

describe("SqliteStore", () => {
  let dir: ReturnType<typeof createTempDir>;
  let path: string;
  let store: SqliteStore;

  beforeEach(() => {
    dir = createTempDir();
    path = join(dir.path, "state.db");
    store = new SqliteStore(path, { now: () => 1_000_000 });
  });
  afterEach(async () => {
    await store.close();
    dir.cleanup();
  });

  it("commits methods called together in one transaction, in call order", async () => {
    const calls = [1, 2, 3].map((n) =>
      store.acceptInbound(inbound({ platformMessageId: String(n), text: `m${n}` })),
    );
    await Promise.all(calls);
    const other = openSqliteDatabase(path, { readonly: true });
    const count = other.prepare("SELECT COUNT(*) AS n FROM inbox").get() as { n: number };
    other.close();
    expect(count.n).toBe(3);
    expect((await store.listOpenInbox()).map((i) => i.text)).toEqual(["m1", "m2", "m3"]);
  });

  it("keeps transcripts parsed between reads and still sees what another process appended", async () => {
    const turn = await store.startTurn({
      sessionKey: "agent:main:telegram:dm:42",
      inboxId: null,
      userMessage: { role: "user", content: "one" },
    });
    const first = await store.loadTranscript(turn.sessionId);
    await store.appendMessages(turn.sessionId, turn.id, [{ role: "assistant", content: "two" }]);
    // A second connection, as `keel` commands open while the gateway runs.
    const other = new SqliteStore(path, { now: () => 1_000_000 });
    await other.appendMessages(turn.sessionId, turn.id, [{ role: "assistant", content: "three" }]);
    await other.close();
    const second = await store.loadTranscript(turn.sessionId);
    expect(second.map((m) => m.message.content)).toEqual(["one", "two", "three"]);
    expect(second[0]).toBe(first[0]);
    const tail = await store.loadTranscript(turn.sessionId, second[1]!.seq);
    expect(tail.map((m) => m.message.content)).toEqual(["three"]);
  });

  it("runs in WAL mode and is at the latest schema version", async () => {
    await store.acceptInbound(inbound());
    expect(store.schemaVersion()).toBe(MIGRATIONS.length);
    await store.close();
    const db = openSqliteDatabase(path);
    expect(db.pragma("journal_mode", { simple: true })).toBe("wal");
    db.close();
    store = new SqliteStore(path);
  });

  it("makes an online backup that opens and holds the sessions", async () => {
    await store.acceptInbound(inbound());
    const copy = join(dir.path, "backup.db");
    await store.backup(copy);
    const backup = new SqliteStore(copy);
    expect((await backup.listSessions()).map((s) => s.key)).toEqual(["agent:main:telegram:dm:42"]);
    await backup.close();
  });
});
