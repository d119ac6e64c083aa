/**
 * What only the Postgres store must do: several gateways share one database, so what SQLite gets
 * from its single writer has to hold across connections here. The common behaviour is in the
 * store contract suite (store.test.ts).
 */
import { spawn } from "node:child_process";
import { join } from "node:path";
import pg from "pg";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { startTcpProxy } from "../../test/fakes/tcp-proxy.js";
import { adminQuery, createTestSchema, TEST_PG_URL } from "../../test/helpers/store-harness.js";
import { waitFor } from "../../test/helpers/wait-for.js";
import type { InboundMessage } from "../contract/platform.js";
import { openPostgresStore } from "./open-store.js";
import { PG_MIGRATIONS } from "./pg-migrations.js";
import { PgStore } from "./pg-store.js";
import { MIGRATIONS } from "./sqlite-migrations.js";

const skip = process.env.KEEL_TEST_PG === "skip";
const HEARTBEAT_LOOP = join(import.meta.dirname, "../../test/fixtures/pg-heartbeat-loop.ts");

function inbound(id: string, overrides: Partial<InboundMessage> = {}): InboundMessage {
  return {
    platform: "api",
    chatId: `agent:main:api:${id}`,
    platformMessageId: id,
    sessionKey: `agent:main:api:${id}`,
    text: "hello",
    address: { platform: "api", chatId: `agent:main:api:${id}` },
    ...overrides,
  };
}

describe.skipIf(skip)("PgStore", () => {
  let schema: Awaited<ReturnType<typeof createTestSchema>>;
  let stores: PgStore[];
  /** Gateways on the same database, each with its own pool. */
  const gateways = (n: number) =>
    Promise.all(
      Array.from({ length: n }, async () => {
        const store = await PgStore.open(TEST_PG_URL, { schema: schema.schema });
        stores.push(store);
        return store;
      }),
    );

  beforeEach(async () => {
    schema = await createTestSchema();
    stores = [];
  });
  afterEach(async () => {
    await Promise.all(stores.map((s) => s.close()));
    await schema.drop();
  });

  it("has one migration for each of SQLite's, at the same number", () => {
    expect(PG_MIGRATIONS).toHaveLength(MIGRATIONS.length);
  });

  it("applies each migration once when several gateways start together", async () => {
    const started = await gateways(4);
    for (const store of started) expect(await store.schemaVersion()).toBe(PG_MIGRATIONS.length);
    const rows = await adminQuery(
      `SELECT version FROM ${schema.schema}.keel_schema_version ORDER BY version`,
    );
    expect(rows.map((r) => r.version)).toEqual(PG_MIGRATIONS.map((_, i) => i + 1));
  });

  it("stores a message delivered to two gateways at once once", async () => {
    const [a, b] = await gateways(2);
    const results = await Promise.all(
      Array.from({ length: 6 }, (_, i) => (i % 2 ? a! : b!).acceptInbound(inbound("m1"))),
    );
    expect(results.filter((r) => r.accepted)).toHaveLength(1);
    expect(new Set(results.map((r) => r.item.id)).size).toBe(1);
    expect(await a!.listOpenInbox()).toHaveLength(1);
  });

  it("lets one request per idempotency key through, whichever gateway gets the repeats", async () => {
    const [a, b] = await gateways(2);
    const claim = { scope: "s", key: "k", requestHash: "h", ttlMs: 60_000 };
    const results = await Promise.all(
      Array.from({ length: 6 }, (_, i) =>
        (i % 2 ? a! : b!).acceptInbound(inbound(`r${i}`, { idempotency: claim })),
      ),
    );
    expect(results.filter((r) => r.accepted)).toHaveLength(1);
    expect(new Set(results.map((r) => r.item.id)).size).toBe(1);
    // The repeats created nothing: one session, one inbox row.
    expect(await a!.listSessions()).toHaveLength(1);
    expect(await a!.listOpenInbox()).toHaveLength(1);
  });

  it("keeps the cap on pending pairing codes across gateways", async () => {
    const [a, b] = await gateways(2);
    const codes = await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        (i % 2 ? a! : b!).requestPairing({
          platform: "telegram",
          userId: String(i),
          userName: null,
          chatId: String(i),
          ttlMs: 60_000,
          maxPending: 3,
        }),
      ),
    );
    expect(codes.filter((c) => c !== null)).toHaveLength(3);
    expect(await a!.listPairingRequests()).toHaveLength(3);
  });

  it("gives a request notice once when two gateways give it at once", async () => {
    const [a, b] = await gateways(2);
    const address = { platform: "telegram", chatId: "42" };
    const given = await Promise.all(
      Array.from({ length: 6 }, (_, i) =>
        (i % 2 ? a! : b!).enqueueRequestNotice({
          sessionKey: "agent:main:telegram:dm:42",
          notice: "held_back",
          address,
          text: "on hold",
        }),
      ),
    );
    expect(given.filter((g) => g !== null)).toHaveLength(1);
    expect(await a!.listPendingOutbox()).toHaveLength(1);
  });

  it("runs its queries without JIT compilation (short queries; unanalysed tables misled it)", async () => {
    const [a] = await gateways(1);
    // The store's own connections, reached as its methods reach them.
    const read = (a as unknown as { read<T>(fn: (db: pg.PoolClient) => Promise<T>): Promise<T> })
      .read;
    const shown = await read.call(a, async (db) => (await db.query("SHOW jit")).rows[0]);
    expect(shown).toEqual({ jit: "off" });
  });

  it("refuses a file backup and says what to use instead", async () => {
    const [a] = await gateways(1);
    await expect(a!.backup("/tmp/x.db")).rejects.toThrow(/pg_dump/);
  });

  it("fails to open with the reason when the database cannot be reached", async () => {
    const url = "postgres://postgres@127.0.0.1:1/test";
    await expect(PgStore.open(url)).rejects.toThrow(
      /^the store \(Postgres postgres:\/\/postgres@127\.0\.0\.1:1\/test\) cannot be opened: .*ECONNREFUSED/,
    );
    // The gateway's store (usable at once): its calls fail with the same reason.
    const lazy = openPostgresStore(url);
    await expect(lazy.listOpenInbox()).rejects.toThrow(/ECONNREFUSED/);
    await lazy.close();
  });

  it("survives its connection dropping in the middle of a transaction, and reconnects", async () => {
    // The store reaches the database through a relay this test cuts (a restart, a lost route).
    const relay = await startTcpProxy({ host: "127.0.0.1", port: 5432 });
    const store = await PgStore.open(`postgres://postgres@127.0.0.1:${relay.port}/test`, {
      schema: schema.schema,
    });
    stores.push(store);
    await store.registerInstance({ id: "A", host: "h", pid: 1, startedAt: 1 });
    // Another connection locks the table: the heartbeat waits inside its transaction.
    const holder = new pg.Client({ connectionString: TEST_PG_URL });
    await holder.connect();
    try {
      await holder.query(`BEGIN; LOCK TABLE ${schema.schema}.instances`);
      const beat = store.heartbeatInstance("A");
      await waitFor(
        async () =>
          (
            await adminQuery(
              `SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock'
                 AND query LIKE 'UPDATE instances SET heartbeat_at%'`,
            )
          ).length > 0,
        { message: "the heartbeat waits on the lock" },
      );
      await relay.cut();
      // The call fails; the process does not (an unheard client error would crash it).
      await expect(beat).rejects.toThrow();
      await holder.query("ROLLBACK");
    } finally {
      await holder.end();
    }
    await relay.restore();
    expect(await store.heartbeatInstance("A")).toBe(true);
    await relay.close();
  });

  it("gives up opening a connection the database does not answer (packets dropped)", async () => {
    const relay = await startTcpProxy({ host: "127.0.0.1", port: 5432 });
    relay.freeze();
    try {
      await expect(
        PgStore.open(`postgres://postgres@127.0.0.1:${relay.port}/test`, {
          schema: schema.schema,
          connectTimeoutMs: 500,
        }),
      ).rejects.toThrow(/cannot be opened: .*timeout/i);
    } finally {
      await relay.close();
    }
  });

  it("a store frozen inside a transaction holds its locks only until the idle limit", async () => {
    const child = spawn(
      process.execPath,
      ["--import", "tsx", HEARTBEAT_LOOP, TEST_PG_URL, schema.schema, "1000"],
      { stdio: "ignore" },
    );
    try {
      await waitFor(
        async () => (await adminQuery(`SELECT 1 FROM ${schema.schema}.instances`)).length > 0,
        { timeoutMs: 30_000, message: "the child's row" },
      );
      // Stop it until it is caught between its heartbeat's UPDATE and COMMIT (bounded tries).
      const inside = async () =>
        (
          await adminQuery(
            `SELECT 1 FROM pg_stat_activity WHERE state = 'idle in transaction'
               AND query LIKE 'UPDATE instances SET heartbeat_at%'`,
          )
        ).length > 0;
      let caught = false;
      for (let i = 0; i < 300 && !caught; i++) {
        child.kill("SIGSTOP");
        caught = await inside();
        if (!caught) child.kill("SIGCONT");
      }
      expect(caught).toBe(true);
      // Its row stays locked while it is frozen: another store's write waits, then goes through
      // once the database has ended the frozen transaction (without the limit: never).
      const [other] = await gateways(1);
      expect(await other!.heartbeatInstance("frozen")).toBe(true);
      expect(await inside()).toBe(false);
    } finally {
      child.kill("SIGKILL");
      child.kill("SIGCONT");
    }
  });

  it("cancels a statement stuck behind a lock at the statement timeout, with a clear error", async () => {
    const store = await PgStore.open(TEST_PG_URL, {
      schema: schema.schema,
      statementTimeoutMs: 300,
    });
    stores.push(store);
    await store.registerInstance({ id: "A", host: "h", pid: 1, startedAt: 1 });
    const holder = new pg.Client({ connectionString: TEST_PG_URL });
    await holder.connect();
    try {
      await holder.query(`BEGIN; LOCK TABLE ${schema.schema}.inbox`);
      // Without the timeout this waits for as long as the lock is held.
      await expect(store.acceptInbound(inbound("stuck"))).rejects.toThrow(
        /cancelled a statement that ran past the statement timeout; nothing of this call was committed/,
      );
      expect(await store.heartbeatInstance("A")).toBe(true);
      await holder.query("ROLLBACK");
    } finally {
      await holder.end();
    }
    // Nothing of the cancelled call was kept; the same message is accepted once it can be.
    expect(await store.listOpenInbox()).toEqual([]);
    expect((await store.acceptInbound(inbound("stuck"))).accepted).toBe(true);
  });

  it("gives up on a database that stops answering (packets dropped) and reconnects after", async () => {
    const relay = await startTcpProxy({ host: "127.0.0.1", port: 5432 });
    try {
      const store = await PgStore.open(`postgres://postgres@127.0.0.1:${relay.port}/test`, {
        schema: schema.schema,
        statementTimeoutMs: 200,
      });
      stores.push(store);
      expect((await store.acceptInbound(inbound("before"))).accepted).toBe(true);
      relay.freeze();
      // Without a client-side limit this call never settles.
      await expect(store.acceptInbound(inbound("during"))).rejects.toThrow(
        /did not answer in time/,
      );
      relay.thaw();
      // The silent connection was dropped, not handed out again: the next calls work.
      expect((await store.listOpenInbox()).map((i) => i.platformMessageId)).toEqual(["before"]);
      expect((await store.acceptInbound(inbound("during"))).accepted).toBe(true);
    } finally {
      await relay.close();
    }
  });

  it("opens lazily for the gateway: calls wait for the migrations, then work", async () => {
    const lazy = openPostgresStore(TEST_PG_URL, { schema: schema.schema });
    const { accepted } = await lazy.acceptInbound(inbound("m1"));
    expect(accepted).toBe(true);
    expect((await lazy.listOpenInbox()).map((i) => i.platformMessageId)).toEqual(["m1"]);
    await lazy.close();
  });
});
