/**
 * Migration 21 (issue 42): what the sessions list shows of each transcript (its count, first user
 * and last message, tokens) is kept as rows are written; a store that already had transcripts
 * and model calls starts from them, on both engines. How the kept values follow writes, /new and
 * retention is in the contract suite (store.test.ts, store-retention.test.ts).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { describe, expect, it } from "vitest";
import { createTestSchema, TEST_PG_URL } from "../../test/helpers/store-harness.js";
import { PG_MIGRATIONS } from "./pg-migrations.js";
import { PgStore } from "./pg-store.js";
import { openSqliteDatabase } from "./sqlite-database.js";
import { MIGRATIONS } from "./sqlite-migrations.js";
import { SqliteStore } from "./sqlite-store.js";
import type { Store } from "./store.js";

const STATS_MIGRATION = 21;
const skipPg = process.env.KEEL_TEST_PG === "skip";

/**
 * The rows of a store before migration 21, in statements with `?` for the engine's placeholders:
 * session a with four messages (two from the user) and two model calls, b with one message.
 */
const OLDER_ROWS: [string, unknown[]][] = [
  ...["a", "b"].map((id): [string, unknown[]] => [
    "INSERT INTO sessions (key, session_id, platform, created_at, updated_at) VALUES (?, ?, 'api', 1, ?)",
    [`agent:main:api:${id}`, `s-${id}`, id === "a" ? 2 : 1],
  ]),
  ...(
    [
      ["s-a", "user", "first question"],
      ["s-a", "assistant", "first answer"],
      ["s-b", "user", "only message of b"],
      ["s-a", "user", "second question"],
      ["s-a", "assistant", "second answer"],
    ] as const
  ).map(([session, role, content]): [string, unknown[]] => [
    "INSERT INTO messages (session_id, role, body, created_at) VALUES (?, ?, ?, 1)",
    [session, role, JSON.stringify({ role, content })],
  ]),
  ...[100, 200].map((prompt): [string, unknown[]] => [
    `INSERT INTO model_usage (session_id, model, purpose, prompt_tokens, completion_tokens, estimated, created_at)
       VALUES ('s-a', 'm', 'turn', ?, 10, ?, 1)`,
    [prompt, false],
  ]),
];

/** What the list shows of the older rows, then after one more message and call in session a. */
async function expectStartsFromOlderRows(store: Store): Promise<void> {
  const listed = async () =>
    Object.fromEntries((await store.listSessions()).map((s) => [s.sessionId, s]));
  expect(await listed()).toMatchObject({
    "s-a": {
      messageCount: 4,
      firstMessage: "first question",
      lastMessage: "second answer",
      promptTokens: 300,
      completionTokens: 20,
    },
    "s-b": {
      messageCount: 1,
      firstMessage: "only message of b",
      lastMessage: "only message of b",
      promptTokens: 0,
    },
  });
  const turn = await store.startTurn({
    sessionKey: "agent:main:api:a",
    inboxId: null,
    userMessage: { role: "user", content: "third question" },
  });
  await store.finishTurn({
    turnId: turn.id,
    state: "done",
    finalMessage: { role: "assistant", content: "third answer" },
    usage: { model: "m", promptTokens: 5, completionTokens: 1, estimated: false },
    reply: null,
  });
  expect((await listed())["s-a"]).toMatchObject({
    messageCount: 6,
    firstMessage: "first question",
    lastMessage: "third answer",
    promptTokens: 305,
    completionTokens: 21,
  });
}

describe("kept transcript figures (migration 21)", () => {
  it("SQLite: starts from the transcripts and model calls already stored", async () => {
    const dir = mkdtempSync(join(tmpdir(), "keel-stats-"));
    try {
      const path = join(dir, "state.db");
      const db = openSqliteDatabase(path);
      for (const [v, sql] of MIGRATIONS.slice(0, STATS_MIGRATION - 1).entries()) {
        db.exec(sql);
        db.exec(`PRAGMA user_version = ${v + 1}`);
      }
      for (const [sql, params] of OLDER_ROWS) {
        db.prepare(sql).run(...params.map((p) => (typeof p === "boolean" ? Number(p) : p)));
      }
      db.close();
      const store = new SqliteStore(path);
      try {
        await expectStartsFromOlderRows(store);
      } finally {
        await store.close();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it.skipIf(skipPg)(
    "Postgres: starts from the transcripts and model calls already stored",
    async () => {
      const schema = await createTestSchema();
      try {
        const client = new pg.Client({
          connectionString: TEST_PG_URL,
          options: `-c search_path=${schema.schema}`,
        });
        await client.connect();
        try {
          await client.query(
            "CREATE TABLE keel_schema_version (version INTEGER PRIMARY KEY, applied_at BIGINT NOT NULL)",
          );
          for (const [v, sql] of PG_MIGRATIONS.slice(0, STATS_MIGRATION - 1).entries()) {
            await client.query(sql);
            await client.query("INSERT INTO keel_schema_version VALUES ($1, 1)", [v + 1]);
          }
          for (const [sql, params] of OLDER_ROWS) {
            let n = 0;
            await client.query(
              sql.replace(/\?/g, () => `$${++n}`),
              params,
            );
          }
        } finally {
          await client.end();
        }
        const store = await PgStore.open(TEST_PG_URL, { schema: schema.schema });
        try {
          expect(await store.schemaVersion()).toBe(STATS_MIGRATION);
          await expectStartsFromOlderRows(store);
        } finally {
          await store.close();
        }
      } finally {
        await schema.drop();
      }
    },
  );
});
