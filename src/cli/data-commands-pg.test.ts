/**
 * Backup, verify and restore on a Postgres store (pg_dump / pg_restore), through the CLI
 * in-process, on a database of this test's own on the test server (never the shared one's
 * schemas: a restore replaces a whole database).
 */
import { readdirSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runCliInProcess } from "../../test/helpers/cli-run.js";
import { testDatabase } from "../../test/helpers/store-harness.js";
import { createTempDir } from "../../test/helpers/temp-home.js";
import { PgStore } from "../sessions/pg-store.js";

const skip = process.env.KEEL_TEST_PG === "skip";
const db = testDatabase("keel_backup");
const url = db.url;

describe.skipIf(skip)("keel backup / restore on Postgres", () => {
  const dir = createTempDir();
  beforeAll(async () => {
    await db.create();
  });
  afterAll(async () => {
    await db.drop();
    dir.cleanup();
  });

  const keel = (...args: string[]) =>
    runCliInProcess(["--home", join(dir.path, "home"), ...args], {
      env: { KEEL_DATABASE_URL: url },
    });

  async function session(key: string): Promise<void> {
    const store = await PgStore.open(url);
    await store.ensureSession(key, { platform: "telegram", chatId: "1" });
    await store.close();
  }

  async function keys(): Promise<string[]> {
    const store = await PgStore.open(url);
    const list = await store.listSessions();
    await store.close();
    return list.map((s) => s.key).sort();
  }

  it("dumps, verifies and restores the database, keeping the replaced one aside", async () => {
    await session("agent:main:telegram:dm:1");
    const backup = join(dir.path, "pg.tar.gz");
    const made = await keel("backup", backup);
    expect(made.code, made.text).toBe(0);
    expect(made.text).toContain("OK (postgres");
    await session("agent:main:telegram:dm:2");
    expect(await keys()).toHaveLength(2);

    const restored = await keel("restore", backup);
    expect(restored.code, restored.text).toBe(0);
    expect(await keys()).toEqual(["agent:main:telegram:dm:1"]);
    const home = join(dir.path, "home");
    const aside = readdirSync(home).find((f) => f.startsWith("restore-aside-"))!;
    expect(readdirSync(join(home, aside))).toContain("store.pgdump");
  });
});
