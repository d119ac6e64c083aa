/** What only the SQLite store does: group commit, WAL durability, online backup to a file. */
import { spawn } from "node:child_process";
import { closeSync, fstatSync, mkdirSync, openSync, readSync, statSync, watch } from "node:fs";
import { join } from "node:path";
import { setImmediate as nextTurn } from "node:timers/promises";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createTempDir } from "../../test/helpers/temp-home.js";
import type { InboundMessage } from "../contract/platform.js";
import { PRUNED_TOOL_OUTPUT } from "./retention-records.js";
import { openSqliteDatabase } from "./sqlite-database.js";
import { MIGRATIONS } from "./sqlite-migrations.js";
import { SqliteStore } from "./sqlite-store.js";
import { CHECKPOINT_FRAMES } from "./wal-checkpoint.js";
import type { FsyncFn } from "./wal-sync.js";

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

  it("rolls back only the method that failed in a group commit, after what it had written", async () => {
    const turn = await store.startTurn({
      sessionKey: "agent:main:telegram:dm:42",
      inboxId: null,
      userMessage: { role: "user", content: "one" },
    });
    const first = store.acceptInbound(inbound({ platformMessageId: "1", text: "m1" }));
    // Its message is written before the usage row, which the schema refuses (no model).
    const failing = store.appendMessages(
      turn.sessionId,
      turn.id,
      [{ role: "assistant", content: "x" }],
      [],
      {
        model: null as unknown as string,
        promptTokens: 1,
        completionTokens: 1,
        estimated: false,
      },
    );
    const last = store.acceptInbound(inbound({ platformMessageId: "2", text: "m2" }));
    await expect(failing).rejects.toThrow(/NOT NULL/);
    await Promise.all([first, last]);
    expect((await store.listOpenInbox()).map((i) => i.text)).toEqual(["m1", "m2"]);
    const transcript = await store.loadTranscript(turn.sessionId);
    expect(transcript.map((m) => m.message.content)).toEqual(["one"]);
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

  it("reads afresh a transcript another process pruned (keel prune beside the gateway)", async () => {
    const turn = await store.startTurn({
      sessionKey: "agent:main:telegram:dm:42",
      inboxId: null,
      userMessage: { role: "user", content: "one" },
    });
    await store.appendMessages(turn.sessionId, turn.id, [
      { role: "tool", tool_call_id: "c1", content: "long output" },
    ]);
    await store.finishTurn({ turnId: turn.id, state: "done", finalMessage: null, reply: null });
    expect((await store.loadTranscript(turn.sessionId))[1]?.message.content).toBe("long output");
    const other = new SqliteStore(path, { now: () => Date.now() + 86_400_000 });
    const cutoffs = { toolOutputBefore: Date.now() + 1000 };
    await other.pruneTranscript(turn.sessionId, cutoffs, false);
    await other.close();
    const after = await store.loadTranscript(turn.sessionId);
    expect(after[1]?.message.content).toBe(PRUNED_TOOL_OUTPUT);
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

  it(`checkpoints the WAL itself every ~${CHECKPOINT_FRAMES} pages, SQLite's own checkpoint off`, async () => {
    const turn = await store.startTurn({
      sessionKey: "agent:main:telegram:dm:42",
      inboxId: null,
      userMessage: { role: "user", content: "one" },
    });
    const pageSize = 4096;
    // ~40 pages a commit, ~10,000 in all, with SQLite's automatic checkpoint turned off: without
    // the store's own, the WAL would hold all of them and the database file none.
    const body = "x".repeat(40 * pageSize);
    for (let i = 0; i < 250; i += 1) {
      await store.appendMessages(turn.sessionId, turn.id, [{ role: "assistant", content: body }]);
    }
    expect(statSync(`${path}-wal`).size).toBeLessThan(1.5 * CHECKPOINT_FRAMES * pageSize);
    expect(statSync(path).size).toBeGreaterThan(CHECKPOINT_FRAMES * pageSize);
    const contents = (await store.loadTranscript(turn.sessionId)).map((m) => m.message.content);
    expect(contents).toHaveLength(251);
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

/**
 * The WAL is flushed off the event loop: an fsync stand-in (the system call, not our code) holds
 * each flush until the test lets it finish, or fails it.
 */
describe("SqliteStore durability", () => {
  let dir: ReturnType<typeof createTempDir>;
  let path: string;
  let store: SqliteStore;
  let flushes: { fd: number; finish(err?: NodeJS.ErrnoException): void; done: boolean }[];

  beforeEach(() => {
    dir = createTempDir();
    path = join(dir.path, "state.db");
    flushes = [];
    const fsync: FsyncFn = (fd, done) => {
      const flush = {
        fd,
        done: false,
        finish: (err?: NodeJS.ErrnoException) => {
          flush.done = true;
          done(err ?? null);
        },
      };
      flushes.push(flush);
    };
    store = new SqliteStore(path, { now: () => 1_000_000, fsync });
  });
  afterEach(async () => {
    // Every flush the store starts, closing included, is let through once.
    const release = setInterval(() => {
      for (const flush of flushes) if (!flush.done) flush.finish();
    }, 1);
    await store.close().catch(() => undefined);
    clearInterval(release);
    dir.cleanup();
  });

  /** Whether `promise` has settled after a few turns of the event loop. */
  async function settled(promise: Promise<unknown>): Promise<boolean> {
    let done = false;
    promise.then(
      () => (done = true),
      () => (done = true),
    );
    for (let i = 0; i < 5; i++) await nextTurn();
    return done;
  }

  it("settles a write only once the WAL file it went to is flushed", async () => {
    const accepted = store.acceptInbound(inbound());
    expect(await settled(accepted)).toBe(false);
    expect(flushes).toHaveLength(1);
    expect(fstatSync(flushes[0]!.fd).ino).toBe(statSync(`${path}-wal`).ino);
    flushes[0]!.finish();
    expect((await accepted).accepted).toBe(true);
  });

  it("commits an inbound message at once and tells when it is on disk; reads need not wait for it", async () => {
    // The first flush covers what an earlier process may have left unflushed (see above).
    const first = store.listOpenInbox();
    await nextTurn();
    flushes[0]!.finish();
    await first;
    const committed = store.commitInbound(inbound());
    expect(await settled(committed)).toBe(true);
    const { accepted, onDisk } = await committed;
    expect(accepted).toBe(true);
    expect(await settled(onDisk)).toBe(false);
    // The runner starts its turn meanwhile: reading it does not wait for the flush.
    expect(await settled(store.listOpenInbox())).toBe(true);
    expect(flushes).toHaveLength(2);
    flushes[1]!.finish();
    expect(await settled(onDisk)).toBe(true);
  });

  it("answers reads once what they may have seen is on disk, and at once when nothing is in flight", async () => {
    // The first answer waits for one flush: a process killed before its fsync may have left
    // commits in the WAL that only the OS holds.
    const first = store.listOpenInbox();
    expect(await settled(first)).toBe(false);
    flushes[0]!.finish();
    await first;
    expect(await settled(store.listOpenInbox())).toBe(true);
    expect(flushes).toHaveLength(1);
    void store.acceptInbound(inbound());
    await nextTurn();
    const open = store.listOpenInbox();
    expect(await settled(open)).toBe(false);
    flushes[1]!.finish();
    expect((await open).map((item) => item.text)).toEqual(["hello"]);
  });

  it("settles a turn's start once committed, reads past it at once, and flushes it with the finish", async () => {
    const accepted = store.acceptInbound(inbound());
    await nextTurn();
    flushes[0]!.finish();
    const { item } = await accepted;
    const turn = await store.startTurn({
      sessionKey: item.sessionKey,
      inboxId: item.id,
      userMessage: { role: "user", content: "hello" },
    });
    // Settled with no flush started: the start alone is acted on by nothing outside.
    expect(flushes).toHaveLength(1);
    const history = store.loadTurnHistory(turn.sessionId);
    expect(await settled(history)).toBe(true);
    expect((await history).messages.map((m) => m.message.content)).toEqual(["hello"]);
    // The finish waits for a flush, which covers the start committed before it.
    const finished = store.finishTurn({
      turnId: turn.id,
      state: "done",
      finalMessage: { role: "assistant", content: "hi" },
      reply: { address: item.address, text: "hi" },
    });
    expect(await settled(finished)).toBe(false);
    expect(flushes).toHaveLength(2);
    flushes[1]!.finish();
    expect((await finished)?.text).toBe("hi");
    // A read waits for a write that must not be seen early, as before.
    void store.acceptInbound(inbound({ platformMessageId: "2" }));
    await nextTurn();
    const open = store.listOpenInbox();
    expect(await settled(open)).toBe(false);
    flushes[2]!.finish();
    expect((await open).map((i) => i.platformMessageId)).toEqual(["2"]);
  });

  it("continues the calls one flush covers a few per turn of the event loop, in call order", async () => {
    const first = store.listOpenInbox();
    flushes[0]!.finish();
    await first;
    const order: number[] = [];
    const calls = Array.from({ length: 20 }, (_, n) =>
      store.acceptInbound(inbound({ platformMessageId: String(n) })).then(() => order.push(n)),
    );
    await nextTurn();
    expect(flushes).toHaveLength(2);
    flushes[1]!.finish();
    // The fsync's callback continues the first eight (their promise chains run before the next
    // turn of the loop); later turns continue the rest, eight at a time.
    for (let i = 0; i < 10; i++) await Promise.resolve();
    expect(order).toHaveLength(8);
    await Promise.all(calls);
    expect(order).toEqual(Array.from({ length: 20 }, (_, n) => n));
  });

  it("holds a read that saw another connection's commit until this one's flush covers it", async () => {
    const first = store.listOpenInbox();
    flushes[0]!.finish();
    await first;
    const theirs: { finish(): void }[] = [];
    const other = new SqliteStore(path, {
      now: () => 1_000_000,
      fsync: (_fd, done) => theirs.push({ finish: () => done(null) }),
    });
    const accepted = other.acceptInbound(inbound({ text: "from a keel command" }));
    await nextTurn();
    expect(theirs.length).toBeGreaterThan(0);
    const open = store.listOpenInbox();
    expect(await settled(open)).toBe(false);
    flushes[1]!.finish();
    expect((await open).map((item) => item.text)).toEqual(["from a keel command"]);
    for (const flush of theirs) flush.finish();
    await accepted;
    await other.close();
  });

  it("lets commits made during a flush share the next one", async () => {
    const first = store.acceptInbound(inbound({ platformMessageId: "1" }));
    await nextTurn();
    const second = store.acceptInbound(inbound({ platformMessageId: "2" }));
    await nextTurn();
    const third = store.acceptInbound(inbound({ platformMessageId: "3" }));
    await nextTurn();
    // Three commits so far, one flush: the later two wait for the second.
    expect(flushes).toHaveLength(1);
    flushes[0]!.finish();
    await first;
    expect(await settled(second)).toBe(false);
    expect(flushes).toHaveLength(2);
    flushes[1]!.finish();
    await Promise.all([second, third]);
    expect(flushes).toHaveLength(2);
  });

  const isDbFlush = (flush: { fd: number }) => fstatSync(flush.fd).ino === statSync(path).ino;

  /** Lets every WAL flush through until `promise` settles; the database file's stay held. */
  async function walFlushesUntil<T>(promise: Promise<T>): Promise<T> {
    let done = false;
    promise.then(
      () => (done = true),
      () => (done = true),
    );
    for (let i = 0; i < 100 && !done; i++) {
      await nextTurn();
      for (const flush of flushes) if (!flush.done && !isDbFlush(flush)) flush.finish();
    }
    return promise;
  }

  /**
   * Commits one message at a time, each WAL flush let through at once, until a checkpoint asks
   * to flush the database file: that flush, held.
   */
  async function commitUntilCheckpoint() {
    const first = store.listOpenInbox();
    flushes[0]!.finish();
    await first;
    for (let n = 0; n < 500 && !flushes.some(isDbFlush); n += 1) {
      await walFlushesUntil(store.acceptInbound(inbound({ platformMessageId: String(n) })));
    }
    const dbFlush = flushes.find(isDbFlush);
    if (!dbFlush) throw new Error("no checkpoint in 500 commits");
    return dbFlush;
  }

  /** The WAL header's salts: SQLite changes them each time it restarts the WAL from its start. */
  function walSalts(): string {
    const fd = openSync(`${path}-wal`, "r");
    try {
      const header = Buffer.alloc(8);
      readSync(fd, header, 0, 8, 16);
      return header.toString("hex");
    } finally {
      closeSync(fd);
    }
  }

  it("checkpoints only flushed frames, holding commits and the WAL until the database file is flushed", async () => {
    const dbFlush = await commitUntilCheckpoint();
    // Copied after every WAL flush before it had finished.
    expect(flushes.slice(0, flushes.indexOf(dbFlush)).every((f) => f.done)).toBe(true);
    // While the database file is not flushed, the next commit waits (reads do not) and the WAL
    // is not started over.
    const salts = walSalts();
    const held = store.acceptInbound(inbound({ platformMessageId: "held" }));
    expect(await settled(held)).toBe(false);
    expect(await settled(store.listOpenInbox())).toBe(true);
    expect(flushes.filter((f) => !f.done)).toEqual([dbFlush]);
    expect(walSalts()).toBe(salts);
    // Once it is, the held commit goes to the start of a new WAL.
    dbFlush.finish();
    expect((await walFlushesUntil(held)).accepted).toBe(true);
    expect(walSalts()).not.toBe(salts);
  });

  it("fails the store when the database file cannot be flushed after a checkpoint", async () => {
    const dbFlush = await commitUntilCheckpoint();
    const salts = walSalts();
    dbFlush.finish(Object.assign(new Error("EIO: i/o error"), { code: "EIO" }));
    await nextTurn();
    expect(store.failure()?.message).toMatch(/could not be flushed to disk \(EIO/);
    await expect(store.listOpenInbox()).rejects.toThrow(/restart the gateway/);
    // The pin stays: another connection writing does not start the WAL over the pages whose
    // flush failed.
    const other = openSqliteDatabase(path);
    other.prepare("UPDATE sessions SET updated_at = 1").run();
    other.close();
    expect(walSalts()).toBe(salts);
  });

  it("closes without deleting the WAL when the last checkpoint's flush fails meanwhile", async () => {
    const dbFlush = await commitUntilCheckpoint();
    const closed = store.close();
    await nextTurn();
    dbFlush.finish(Object.assign(new Error("EIO: i/o error"), { code: "EIO" }));
    await closed;
    expect(store.failure()?.message).toMatch(/could not be flushed/);
    // Left as the disk holds it for the next start: closing would have copied and deleted it.
    expect(statSync(`${path}-wal`).size).toBeGreaterThan(0);
  });

  it("fails the waiting calls and every later one when a flush fails", async () => {
    const accepted = store.acceptInbound(inbound());
    await nextTurn();
    expect(store.failure()).toBeNull();
    flushes[0]!.finish(Object.assign(new Error("EIO: i/o error, fsync"), { code: "EIO" }));
    await expect(accepted).rejects.toThrow(/state\.db could not be flushed to disk \(EIO/);
    expect(store.failure()?.message).toMatch(/could not be flushed/);
    await expect(store.listOpenInbox()).rejects.toThrow(/restart the gateway/);
    await expect(store.acceptInbound(inbound({ platformMessageId: "2" }))).rejects.toThrow(
      /could not be flushed/,
    );
    // Refused, not committed: only the first message is in the file.
    const db = openSqliteDatabase(path, { readonly: true });
    const rows = db.prepare("SELECT platform_message_id AS id FROM inbox").all();
    db.close();
    expect(rows).toEqual([{ id: "1" }]);
  });
});

describe("SqliteStore's temporary data", () => {
  it("keeps its temporary data in memory: turns and sorted reads create no temporary file", async () => {
    const dir = createTempDir();
    try {
      const temp = join(dir.path, "sqlite-tmp");
      mkdirSync(temp);
      const created: string[] = [];
      const watcher = watch(temp, (_event, name) => created.push(String(name)));
      const child = spawn(
        process.execPath,
        [
          "--import",
          "tsx",
          join(import.meta.dirname, "../../test/fixtures/store-turns.ts"),
          join(dir.path, "state.db"),
        ],
        { env: { ...process.env, SQLITE_TMPDIR: temp }, stdio: ["ignore", "pipe", "inherit"] },
      );
      let out = "";
      child.stdout.on("data", (chunk: Buffer) => {
        out += chunk.toString();
      });
      const code = await new Promise<number | null>((resolve) => child.on("exit", resolve));
      // fs.watch reports from the event loop: let the last events arrive.
      await new Promise((resolve) => setTimeout(resolve, 200));
      watcher.close();
      expect({ code, out }).toEqual({ code: 0, out: "done\n" });
      expect(created).toEqual([]);
    } finally {
      dir.cleanup();
    }
  });
});
