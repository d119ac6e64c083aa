/**
 * The store implementations the store contract suite runs against, each on an empty database per
 * test: SQLite in a new temporary folder, Postgres in a schema of the test file's own on the
 * server at KEEL_TEST_PG_URL (default postgres://postgres@127.0.0.1:5432/test), migrated once and
 * emptied after each test (dropped after the file), so test files running in parallel never see
 * each other's rows.
 *
 * Postgres is required: when it is unreachable the Postgres half fails with the reason, it is not
 * skipped (CI has one and must run both). `KEEL_TEST_PG=skip` leaves it out, on purpose, on a
 * machine without one.
 */
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import pg from "pg";
import { afterAll } from "vitest";
import { PgStore } from "../../src/sessions/pg-store.js";
import { openSqliteDatabase } from "../../src/sessions/sqlite-database.js";
import { SqliteStore } from "../../src/sessions/sqlite-store.js";
import type { Store } from "../../src/sessions/store.js";
import { createTempDir } from "./temp-home.js";

export const TEST_PG_URL =
  process.env.KEEL_TEST_PG_URL ?? "postgres://postgres@127.0.0.1:5432/test";

export interface StoreHarness {
  name: "sqlite" | "postgres";
  /** A fresh, empty database for the next test. */
  setup(): Promise<void>;
  /**
   * Opens the current test's database; a second call after close() reopens the same one. With
   * `instanceId`, as the store of that gateway (the inbox rows it accepts carry the id).
   */
  open(
    now?: () => number,
    options?: { instanceId?: string; onCommit?: (seconds: number) => void },
  ): Promise<Store>;
  /** A raw read of what is stored, beside the interface (for checks on the record itself). */
  rows(sql: string): Promise<Record<string, unknown>[]>;
  /** Removes the current test's database. */
  teardown(): Promise<void>;
}

export function sqliteHarness(): StoreHarness {
  let dir: ReturnType<typeof createTempDir> | null = null;
  const path = () => join(dir!.path, "state.db");
  return {
    name: "sqlite",
    setup: async () => {
      dir = createTempDir();
    },
    open: async (now, options) => new SqliteStore(path(), { ...(now && { now }), ...options }),
    rows: async (sql) => {
      const db = openSqliteDatabase(path(), { readonly: true });
      try {
        return db.prepare(sql).all() as Record<string, unknown>[];
      } finally {
        db.close();
      }
    },
    teardown: async () => {
      dir?.cleanup();
      dir = null;
    },
  };
}

/** A new schema on the test server; `drop()` removes it and everything in it. */
export async function createTestSchema(): Promise<{ schema: string; drop(): Promise<void> }> {
  const schema = `keel_test_${process.pid}_${randomBytes(4).toString("hex")}`;
  await adminQuery(`CREATE SCHEMA ${schema}`);
  return {
    schema,
    drop: async () => {
      await adminQuery(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    },
  };
}

/**
 * A database of its own on the test server (for what works on a whole database: a restore, a
 * CLI pointed at a store URL): `create()` makes it empty, `drop()` removes it.
 */
export function testDatabase(prefix: string): {
  url: string;
  create(): Promise<void>;
  drop(): Promise<void>;
} {
  const name = `${prefix}_${process.pid}`;
  return {
    url: TEST_PG_URL.replace(/\/[^/]*$/, `/${name}`),
    create: async () => {
      await adminQuery(`DROP DATABASE IF EXISTS ${name}`);
      await adminQuery(`CREATE DATABASE ${name}`);
    },
    drop: async () => {
      await adminQuery(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    },
  };
}

/** One statement on its own connection, with a message that says what to do when it fails. */
export async function adminQuery(sql: string): Promise<Record<string, unknown>[]> {
  const client = new pg.Client({ connectionString: TEST_PG_URL });
  try {
    await client.connect();
  } catch (err) {
    throw new Error(
      `Postgres at ${TEST_PG_URL} is unreachable (${(err as Error).message}). The store suite runs against Postgres too; start one, point KEEL_TEST_PG_URL at it, or set KEEL_TEST_PG=skip to leave the Postgres half out on purpose.`,
    );
  }
  try {
    // Several statements give one result each: the last is the one asked for.
    const result = (await client.query(sql)) as pg.QueryResult | pg.QueryResult[];
    const last = Array.isArray(result) ? result[result.length - 1]! : result;
    return last.rows as Record<string, unknown>[];
  } finally {
    await client.end();
  }
}

/**
 * Migrating a new schema takes most of a second, and dropping it a third: the harness keeps one
 * schema for the whole file and empties it after each test instead (every row deleted, identities
 * restarted), which leaves it as empty as a new one in a tenth of the time. Call it while a test
 * file is collected (it registers the file's `afterAll`, which drops the schema).
 */
export function postgresHarness(): StoreHarness {
  let current: { schema: string; drop(): Promise<void> } | null = null;
  let empty: string | null = null;
  afterAll(async () => {
    await current?.drop();
    current = null;
  });
  return {
    name: "postgres",
    setup: async () => {
      current ??= await createTestSchema();
    },
    open: (now, options) =>
      PgStore.open(TEST_PG_URL, { schema: current!.schema, ...(now && { now }), ...options }),
    rows: (sql) => adminQuery(`SET search_path TO ${current!.schema}; ${sql}`),
    teardown: async () => {
      if (!current) return;
      // Worked out once the migrations have run (the first test opened a store).
      empty ??= await emptyingStatement(current.schema);
      if (empty) await adminQuery(empty);
    },
  };
}

/**
 * Deletes every row of `schema` but the migrations' record (and sets the kept totals to zero),
 * and restarts its identity columns;
 * null before the migrations made tables. The tables have no foreign keys, so any order works.
 * TRUNCATE would do the same but is slower than deleting a few rows (it replaces each table's files).
 */
async function emptyingStatement(schema: string): Promise<string | null> {
  const tables = await adminQuery(
    `SELECT tablename FROM pg_tables WHERE schemaname = '${schema}' AND tablename <> 'keel_schema_version'`,
  );
  if (tables.length === 0) return null;
  const identities = await adminQuery(
    `SELECT c.relname AS table_name, a.attname AS column_name FROM pg_attribute a
       JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE n.nspname = '${schema}' AND a.attidentity <> ''`,
  );
  return [
    // A store the test left open must not hang the file: its lock wait fails instead.
    "SET lock_timeout = '10s'",
    ...tables
      .filter((t) => t.tablename !== "store_totals")
      .map((t) => `DELETE FROM ${schema}."${String(t.tablename)}"`),
    // Its shards' rows are the schema's own (migration 20): emptied, they stay.
    ...(tables.some((t) => t.tablename === "store_totals")
      ? [
          `UPDATE ${schema}.store_totals SET sessions = 0, calls = 0, prompt = 0, completion = 0, estimated = 0`,
        ]
      : []),
    ...identities.map(
      (c) =>
        `ALTER TABLE ${schema}."${String(c.table_name)}" ALTER COLUMN "${String(c.column_name)}" RESTART`,
    ),
  ].join("; ");
}

/** Every implementation the contract suite covers here (Postgres unless explicitly skipped). */
export function storeHarnesses(): StoreHarness[] {
  if (process.env.KEEL_TEST_PG === "skip") {
    console.warn("KEEL_TEST_PG=skip: the store suite runs on SQLite only");
    return [sqliteHarness()];
  }
  return [sqliteHarness(), postgresHarness()];
}
