/**
 * Migration 20 (issue 42): the totals the status and the session list read are kept as rows are
 * written, and a store that already had sessions and model calls starts from their sums.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { openSqliteDatabase } from "./sqlite-database.js";
import { MIGRATIONS } from "./sqlite-migrations.js";
import { SqliteStore } from "./sqlite-store.js";

const TOTALS_MIGRATION = 20;
let dir: string;

afterEach(() => rmSync(dir, { recursive: true, force: true }));

/** A database as Keel left it before migration 20, with two sessions and three model calls. */
function olderDatabase(path: string): void {
  const db = openSqliteDatabase(path);
  for (const [v, sql] of MIGRATIONS.slice(0, TOTALS_MIGRATION - 1).entries()) {
    db.exec(sql);
    db.exec(`PRAGMA user_version = ${v + 1}`);
  }
  const session = db.prepare(
    "INSERT INTO sessions (key, session_id, platform, created_at, updated_at) VALUES (?, ?, 'api', 1, 1)",
  );
  session.run("agent:main:api:a", "s-a");
  session.run("agent:main:api:b", "s-b");
  const call = db.prepare(
    `INSERT INTO model_usage (session_id, model, purpose, prompt_tokens, completion_tokens, estimated, created_at)
     VALUES ('s-a', 'm', 'turn', ?, ?, ?, 1)`,
  );
  call.run(100, 10, 0);
  call.run(200, 20, 1);
  call.run(300, 30, 0);
  db.close();
}

describe("kept totals (migration 20)", () => {
  it("starts from the sums of the rows already stored, then counts what is written", async () => {
    dir = mkdtempSync(join(tmpdir(), "keel-totals-"));
    const path = join(dir, "state.db");
    olderDatabase(path);
    const store = new SqliteStore(path);
    try {
      expect(await store.countSessions()).toEqual({ total: 2, resumePending: 0 });
      expect(await store.totalUsage()).toMatchObject({
        calls: 3,
        promptTokens: 600,
        completionTokens: 60,
        estimatedCalls: 1,
      });
      const started = await store.startTurn({
        sessionKey: "agent:main:api:c",
        inboxId: null,
        userMessage: { role: "user", content: "hi" },
      });
      await store.appendMessages(started.sessionId, started.id, [], [], {
        model: "m",
        promptTokens: 5,
        completionTokens: 1,
        estimated: true,
      });
      await store.markResumePending(["agent:main:api:a"], "restart_interrupted");
      expect(await store.countSessions()).toEqual({ total: 3, resumePending: 1 });
      expect(await store.totalUsage()).toMatchObject({
        calls: 4,
        promptTokens: 605,
        completionTokens: 61,
        estimatedCalls: 2,
      });
    } finally {
      await store.close();
    }
  });
});
