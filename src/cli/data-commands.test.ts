/**
 * The data lifecycle's commands (issue 41), in-process against temporary homes: prune and its dry
 * run, one person's export and erasure, backup → verify → corrupt → verify, and restore.
 */
import {
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  statSync,
  utimesSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import { strFromU8, unzipSync } from "fflate";
import * as tar from "tar";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { runCliInProcess } from "../../test/helpers/cli-run.js";
import { createTempDir } from "../../test/helpers/temp-home.js";
import { readProcessStartTime } from "../lifecycle/process-info.js";
import { openSqliteDatabase } from "../sessions/sqlite-database.js";
import { SqliteStore } from "../sessions/sqlite-store.js";

const DAY = 86_400_000;
let messageNumber = 0;
let dir: ReturnType<typeof createTempDir>;
let home: string;
beforeEach(() => {
  dir = createTempDir();
  home = join(dir.path, "home");
  mkdirSync(home, { mode: 0o700 });
});
afterEach(() => dir.cleanup());

const keel = (...args: string[]) => runCliInProcess(["--home", home, ...args]);

/** One answered message from `user` in their DM, written `at`. */
async function talk(user: string, text: string, at = Date.now(), chat = user, key?: string) {
  messageNumber += 1;
  const store = new SqliteStore(join(home, "state.db"), { now: () => at });
  const sessionKey = key ?? `agent:main:telegram:dm:${user}`;
  const address = { platform: "telegram", chatId: chat };
  const { item } = await store.acceptInbound({
    platform: "telegram",
    chatId: chat,
    platformMessageId: String(messageNumber),
    sessionKey,
    text,
    senderId: user,
    senderName: `name-${user}`,
    address,
  });
  const turn = await store.startTurn({
    sessionKey,
    inboxId: item.id,
    userMessage: { role: "user", content: text },
    origin: address,
    memoryUser: `telegram-${user}`,
  });
  const reply = await store.finishTurn({
    turnId: turn.id,
    state: "done",
    finalMessage: { role: "assistant", content: `reply to ${text}` },
    reply: { address, text: `reply to ${text}` },
    usage: { model: "m", promptTokens: 10, completionTokens: 1, estimated: false },
  });
  if (reply) await store.markDelivered(reply.id);
  await store.close();
  return turn.sessionId;
}

function rawDb(): string {
  const db = openSqliteDatabase(join(home, "state.db"));
  db.exec("PRAGMA wal_checkpoint(TRUNCATE); VACUUM");
  db.close();
  return readFileSync(join(home, "state.db")).toString("latin1");
}

describe("keel prune", () => {
  it("says so when no retention is configured", async () => {
    const run = await keel("prune");
    expect(run.code).toBe(0);
    expect(run.text).toContain("No retention is configured");
  });

  it("dry run reports and changes nothing; the real run removes old data and files", async () => {
    writeFileSync(
      join(home, "config.yaml"),
      "retention:\n  transcripts_days: 30\n  uploads_days: 30\n",
    );
    const old = await talk("1", "ancient words", Date.now() - 60 * DAY);
    await talk("2", "fresh words");
    const uploads = join(home, "workspace", "inbox", old);
    mkdirSync(uploads, { recursive: true });
    writeFileSync(join(uploads, "photo.jpg"), "x".repeat(2048));
    const past = (Date.now() - 60 * DAY) / 1000;
    utimesSync(join(uploads, "photo.jpg"), past, past);

    const dry = await keel("prune", "--dry-run");
    expect(dry.code).toBe(0);
    expect(dry.text).toMatch(/Would remove: .*2 messages.*1 inbox rows.*1 outbox rows.*1 files/);
    expect(rawDb()).toContain("ancient words");
    expect(existsSync(join(uploads, "photo.jpg"))).toBe(true);

    const real = await keel("prune");
    expect(real.text).toMatch(/Removed: .*2 messages/);
    const raw = rawDb();
    expect(raw).not.toContain("ancient words");
    expect(raw).toContain("fresh words");
    expect(existsSync(uploads)).toBe(false);
    expect((await keel("prune")).text).toContain("nothing to prune");
  });
});

describe("keel user export / forget", () => {
  it("exports one person's data and then forgets them, leaving others intact", async () => {
    const five = await talk("5", "five private");
    await talk("6", "six private");
    await talk("5", "five in public", Date.now(), "-100", "agent:main:telegram:group:-100");
    await talk("6", "six in public", Date.now(), "-100", "agent:main:telegram:group:-100");
    mkdirSync(join(home, "memory"), { recursive: true });
    writeFileSync(join(home, "memory", "telegram-5.md"), "likes tea");
    writeFileSync(join(home, "memory", "telegram-6.md"), "likes coffee");
    mkdirSync(join(home, "workspace", "inbox", five), { recursive: true });
    writeFileSync(join(home, "workspace", "inbox", five, "note.txt"), "five's file");

    const out = join(dir.path, "five.zip");
    const exported = await keel("user", "export", "telegram:5", "--out", out);
    expect(exported.code).toBe(0);
    expect(statSync(out).mode & 0o777).toBe(0o600);
    const zip = unzipSync(readFileSync(out));
    expect(Object.keys(zip).sort()).toEqual(
      ["memory.md", `uploads/${five}/note.txt`, "person.json"].sort(),
    );
    const person = strFromU8(zip["person.json"]!);
    expect(person).toContain("five private");
    expect(person).toContain("five in public");
    expect(person).not.toContain("six");
    expect(strFromU8(zip["memory.md"]!)).toBe("likes tea");

    const forgot = await keel("user", "forget", "telegram:5");
    expect(forgot.code).toBe(0);
    const raw = rawDb();
    expect(raw).not.toContain("five");
    expect(raw).not.toContain("name-5");
    expect(raw).toContain("six private");
    expect(raw).toContain("six in public");
    expect(existsSync(join(home, "memory", "telegram-5.md"))).toBe(false);
    expect(existsSync(join(home, "memory", "telegram-6.md"))).toBe(true);
    expect(existsSync(join(home, "workspace", "inbox", five))).toBe(false);
    const audit = readFileSync(join(home, "logs", "audit.log"), "utf8");
    expect(audit).toContain('"action":"user.forget"');
    expect(audit).not.toContain("five");
  });

  it("refuses a malformed person", async () => {
    expect((await keel("user", "forget", "nobody")).code).toBe(2);
  });
});

describe("keel backup / restore", () => {
  it("writes a verified backup without secrets; a corrupted copy fails verification", async () => {
    writeFileSync(
      join(home, "config.yaml"),
      "platforms:\n  telegram:\n    token: 123:SECRET\n    allowed_users: [5]\n",
    );
    await talk("5", "hello");
    const made = await keel("backup", dir.path);
    expect(made.code).toBe(0);
    const file = readdirSync(dir.path).find((f) => f.endsWith(".tar.gz"))!;
    const path = join(dir.path, file);
    expect(statSync(path).mode & 0o777).toBe(0o600);
    expect(made.text).toContain("OK (sqlite");

    const verified = await keel("backup", "--verify", path);
    expect(verified.code).toBe(0);
    expect(verified.text).toMatch(/1 sessions, 2 messages/);
    const unpacked = join(dir.path, "unpacked");
    mkdirSync(unpacked);
    await tar.x({ file: path, cwd: unpacked });
    const config = readFileSync(join(unpacked, "home", "config.yaml"), "utf8");
    expect(config).not.toContain("SECRET");
    expect(config).toContain("allowed_users");

    // A flipped byte in the middle of the archive.
    const bytes = readFileSync(path);
    const middle = Math.floor(bytes.length / 2);
    bytes[middle] = (bytes[middle] ?? 0) ^ 0xff;
    writeFileSync(join(dir.path, "flipped.tar.gz"), bytes);
    const flipped = await keel("backup", "--verify", join(dir.path, "flipped.tar.gz"));
    expect(flipped.code).toBe(1);
    expect(flipped.text).toContain("FAILED verification");

    // A repacked archive whose database copy was damaged (its checksum no longer matches).
    const db = readFileSync(join(unpacked, "state.db"));
    db.fill(0x41, 4096, 8192);
    writeFileSync(join(unpacked, "state.db"), db);
    const damaged = join(dir.path, "damaged.tar.gz");
    await tar.c({ gzip: true, file: damaged, cwd: unpacked }, readdirSync(unpacked));
    const bad = await keel("backup", "--verify", damaged);
    expect(bad.code).toBe(1);
    expect(bad.text).toContain("state.db fails its checksum");
  });

  it("restores into a stopped home, keeping the replaced data aside", async () => {
    await talk("5", "before the backup");
    mkdirSync(join(home, "memory"));
    writeFileSync(join(home, "memory", "telegram-5.md"), "remembered");
    const backup = join(dir.path, "b.tar.gz");
    expect((await keel("backup", backup)).code).toBe(0);
    await talk("6", "after the backup");
    writeFileSync(join(home, "memory", "telegram-5.md"), "changed");

    const restored = await keel("restore", backup);
    expect(restored.code).toBe(0);
    const raw = rawDb();
    expect(raw).toContain("before the backup");
    expect(raw).not.toContain("after the backup");
    expect(readFileSync(join(home, "memory", "telegram-5.md"), "utf8")).toBe("remembered");
    const aside = readdirSync(home).find((f) => f.startsWith("restore-aside-"))!;
    expect(readFileSync(join(home, aside, "memory", "telegram-5.md"), "utf8")).toBe("changed");
    expect(existsSync(join(home, aside, "state.db"))).toBe(true);
    expect(readFileSync(join(home, "logs", "audit.log"), "utf8")).toContain('"action":"restore"');
  });

  it("refuses while a gateway runs on the home", async () => {
    await talk("5", "hi");
    const backup = join(dir.path, "b.tar.gz");
    expect((await keel("backup", backup)).code).toBe(0);
    writeFileSync(
      join(home, "gateway.pid"),
      JSON.stringify({
        pid: process.pid,
        start_time: await readProcessStartTime(process.pid),
        argv: process.argv,
      }),
    );
    const refused = await keel("restore", backup);
    expect(refused.code).toBe(1);
    expect(refused.text).toContain("stop it first");
  });
});
