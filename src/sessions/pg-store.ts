/**
 * The Postgres implementation of Store (the `pg` client over a pool): one transaction per method
 * (BEGIN … COMMIT on one pooled connection), the same semantics as SqliteStore. Several gateways
 * may share the database, so where SQLite relies on its single writer, this store relies on the
 * database: unique keys with ON CONFLICT, conditional updates (compare-and-set), row locks
 * (FOR UPDATE) and transaction-scoped advisory locks for the few read-then-write checks that have
 * no row to lock (an idempotency key not stored yet, the pending pairing codes of a platform).
 *
 * Unlike SQLite's group commit, calls made together are independent transactions: they commit
 * in any order. A caller that needs an order awaits (the runner and the adapters do).
 *
 * This class is the engine: the pool, the migrations, the transaction helper and its timeouts.
 * The SQL of each role is in the role's folder (inbox/pg.ts, turns/pg.ts, …).
 */
import type pg from "pg";
import { describeStoreTarget } from "../config/store-target.js";
import { errorMessage } from "../lib/errors.js";
import { pgApprovals } from "./approvals/pg.js";
import { pgBudgets } from "./budgets/pg.js";
import { pgCluster } from "./cluster/pg.js";
import { pgInbox } from "./inbox/pg.js";
import { pgOutbox } from "./outbox/pg.js";
import { pgPairing } from "./pairing/pg.js";
import { PG_MIGRATIONS } from "./pg-migrations.js";
import { type Db, first, type PgContext } from "./pg-shared.js";
import { pgPlatformData } from "./platform-data/pg.js";
import { pgReporting } from "./reporting/pg.js";
import { pgRetention } from "./retention/pg.js";
import { pgSchedules } from "./schedules/pg.js";
import { pgSessionState } from "./session-state/pg.js";
import type { CommitObserver, Store, StoreHandle } from "./store.js";
import { pgStreams } from "./streams/pg.js";
import { pgTasks } from "./tasks/pg.js";
import { pgTurns } from "./turns/pg.js";

export interface PgStoreOptions {
  /** Injected clock (epoch ms); stored times come from it, as in SqliteStore. */
  now?: () => number;
  /** Schema (search_path) to keep Keel's tables in; default: the connection's own. */
  schema?: string;
  /** Connections in the pool (default 10). */
  maxConnections?: number;
  /**
   * How long the database lets a transaction of this store sit idle before it ends it (default
   * 5 s; ours take milliseconds). A gateway frozen in the middle of one (a paused VM, SIGSTOP)
   * would otherwise hold its row locks, and the others' takeover would wait on them.
   */
  idleInTransactionMs?: number;
  /**
   * How long opening a connection may take before it fails (default 10 s): a database host that
   * drops packets would otherwise hold a start or a call for the system's TCP timeout (minutes).
   */
  connectTimeoutMs?: number;
  /**
   * How long one statement may run before the database cancels it (default 30 s; ours take
   * milliseconds): a query stuck behind a lock fails with a clear error instead of holding its
   * caller. The URL's own `statement_timeout` parameter wins. The client gives up waiting for an
   * answer 5 s after that (a database host that drops packets never sends the cancellation) and
   * drops the connection.
   */
  statementTimeoutMs?: number;
  /** The gateway using this store (several share it): inbox rows it accepts carry this id. */
  instanceId?: string;
  /** Told how long each write transaction took, BEGIN to COMMIT (failed ones are not told). */
  onCommit?: CommitObserver;
}

const INT8_OID = 20;

/** How much longer than the statement timeout the client waits for an answer. */
const CLIENT_TIMEOUT_MARGIN_MS = 5000;

/**
 * BIGINT (times in epoch ms, identity ids, COUNT) arrives as a JS number, like SQLite's
 * integers: every value Keel stores fits in 2^53. Set on this pool only, not globally.
 */
function customTypes(pgTypes: typeof pg.types): pg.CustomTypesConfig {
  return {
    getTypeParser: ((oid: number, format?: "text" | "binary") =>
      oid === INT8_OID
        ? (value: string) => Number(value)
        : pgTypes.getTypeParser(oid, format)) as pg.CustomTypesConfig["getTypeParser"],
  };
}

/** The URL's `statement_timeout` parameter (ms), which pg applies over ours; null without one. */
function urlStatementTimeout(url: string): number | null {
  try {
    const value = Number(new URL(url).searchParams.get("statement_timeout") ?? Number.NaN);
    return Number.isFinite(value) && value > 0 ? value : null;
  } catch {
    return null;
  }
}

/** pg's own error when no answer came within `query_timeout`. */
function isReadTimeout(err: unknown): boolean {
  return err instanceof Error && err.message === "Query read timeout";
}

/**
 * A call the database cancelled (statement timeout) or never answered, told plainly: what it
 * wrote was rolled back, except when the silence fell on its COMMIT (then nobody can say).
 * Null for any other error.
 */
function timedOut(err: unknown, committing: boolean): Error | null {
  const cancelled = (err as { code?: string } | null)?.code === "57014";
  if (!cancelled && !isReadTimeout(err)) return null;
  const what = cancelled
    ? "the database cancelled a statement that ran past the statement timeout"
    : "the database did not answer in time (no reply past the statement timeout)";
  const outcome = committing
    ? "whether its commit went through is unknown"
    : "nothing of this call was committed";
  return new Error(`${what}; ${outcome}`, { cause: err });
}

/**
 * The store's role methods come from the role modules (inbox/pg.ts, …), assigned in the
 * constructor from an object checked to hold every role.
 */
export interface PgStore extends Store {}

// biome-ignore lint/suspicious/noUnsafeDeclarationMerging: the roles are assigned in the constructor (see the interface).
export class PgStore {
  /** The pool, once `pg` has loaded (it loads only when a Postgres store is opened). */
  private readonly pool: Promise<pg.Pool>;
  private readonly now: () => number;
  private readonly instanceId: string | null;
  private readonly onCommit: CommitObserver | null;
  /** Settles once the schema is current; every method waits for it (and fails with it). */
  private readonly ready: Promise<void>;

  /** Opens the store and waits for its migrations: connection and schema errors surface here. */
  static async open(url: string, options: PgStoreOptions = {}): Promise<PgStore> {
    const store = new PgStore(url, options);
    try {
      await store.ready;
    } catch (err) {
      await (await store.pool).end().catch(() => {});
      throw err;
    }
    return store;
  }

  constructor(url: string, options: PgStoreOptions = {}) {
    this.now = options.now ?? Date.now;
    this.instanceId = options.instanceId ?? null;
    this.onCommit = options.onCommit ?? null;
    const statementTimeoutMs = urlStatementTimeout(url) ?? options.statementTimeoutMs ?? 30_000;
    this.pool = import("pg").then(({ default: pgModule }) => {
      const pool = new pgModule.Pool({
        connectionString: url,
        types: customTypes(pgModule.types),
        max: options.maxConnections ?? 10,
        application_name: "keel",
        idle_in_transaction_session_timeout: options.idleInTransactionMs ?? 5000,
        connectionTimeoutMillis: options.connectTimeoutMs ?? 10_000,
        statement_timeout: statementTimeoutMs,
        query_timeout: statementTimeoutMs + CLIENT_TIMEOUT_MARGIN_MS,
        ...(options.schema && { options: `-c search_path=${quoteIdent(options.schema)}` }),
      });
      // An idle connection the server drops must not crash the process; the next query reconnects.
      pool.on("error", () => {});
      // No JIT: Keel's queries are short, and on tables not yet analysed (a big import, a restored
      // backup) the planner's estimates made Postgres compile /api/sessions for 3 s to run it in
      // 30 ms. Sent first on each new connection, before any query of the store's.
      pool.on("connect", (client) => {
        client.query("SET jit = off").catch(() => {});
      });
      return pool;
    });
    const where = describeStoreTarget({ kind: "postgres", url });
    this.ready = this.migrate().catch((err: unknown) => {
      throw new Error(`the store (${where}) cannot be opened: ${errorMessage(err)}`, {
        cause: err,
      });
    });
    this.ready.catch(() => {});
    const s: PgContext = {
      read: (fn) => this.read(fn),
      tx: (fn) => this.tx(fn),
      now: this.now,
      instanceId: this.instanceId,
    };
    const roles: Omit<Store, keyof StoreHandle> = {
      ...pgInbox(s),
      ...pgSessionState(s),
      ...pgTurns(s),
      ...pgOutbox(s),
      ...pgStreams(s),
      ...pgTasks(s),
      ...pgApprovals(s),
      ...pgBudgets(s),
      ...pgPairing(s),
      ...pgPlatformData(s),
      ...pgSchedules(s),
      ...pgCluster(s),
      ...pgReporting(s),
      ...pgRetention(s),
    };
    Object.assign(this, roles);
  }

  /**
   * Applies the migrations not applied yet in one transaction, under a transaction-scoped
   * advisory lock: gateways starting together on one database wait for each other instead of
   * applying a migration twice (Postgres DDL is transactional, so a failure applies nothing).
   */
  private async migrate(): Promise<void> {
    await this.transaction(async (db) => {
      await db.query("SELECT pg_advisory_xact_lock(hashtext('keel:migrate:' || current_schema()))");
      await db.query(
        `CREATE TABLE IF NOT EXISTS keel_schema_version (
           version INTEGER PRIMARY KEY, applied_at BIGINT NOT NULL)`,
      );
      const current = await this.versionIn(db);
      for (let v = current; v < PG_MIGRATIONS.length; v++) {
        await db.query(PG_MIGRATIONS[v]!);
        await db.query("INSERT INTO keel_schema_version (version, applied_at) VALUES ($1, $2)", [
          v + 1,
          this.now(),
        ]);
      }
    });
  }

  private async versionIn(db: Db): Promise<number> {
    const row = await first<{ v: number }>(
      db,
      "SELECT COALESCE(MAX(version), 0) AS v FROM keel_schema_version",
    );
    return row?.v ?? 0;
  }

  /** Schema version after migrations (for doctor and tests). */
  async schemaVersion(): Promise<number> {
    return this.read((db) => this.versionIn(db));
  }

  /** BEGIN … COMMIT on one pooled connection; ROLLBACK when `fn` throws. */
  private async transaction<T>(fn: (db: Db) => Promise<T>, begin = "BEGIN"): Promise<T> {
    const client = await (await this.pool).connect();
    let broken: Error | undefined;
    // A connection lost while checked out (the server restarted or became unreachable) emits
    // `error` on the client, and the pool listens only to idle ones: unheard, it would crash
    // the process. The query in flight fails with it anyway; the client is dropped on release.
    const onLost = (err: Error) => {
      broken = err;
    };
    client.on("error", onLost);
    let committing = false;
    try {
      await client.query(begin);
      const value = await fn(client);
      committing = true;
      await client.query("COMMIT");
      return value;
    } catch (err) {
      if (isReadTimeout(err)) {
        // The database never answered: a ROLLBACK would wait the same way. The connection is
        // dropped, which ends the transaction on the server once it hears of it.
        broken = err as Error;
      } else {
        await client.query("ROLLBACK").catch((rollbackError: Error) => {
          // The connection is unusable: the pool drops it instead of handing it out again.
          broken = rollbackError;
        });
      }
      throw timedOut(err, committing) ?? err;
    } finally {
      client.removeListener("error", onLost);
      client.release(broken);
    }
  }

  /** A write: one transaction, after the migrations. */
  private async tx<T>(fn: (db: Db) => Promise<T>): Promise<T> {
    await this.ready;
    const observe = this.onCommit;
    if (!observe) return this.transaction(fn);
    const started = performance.now();
    const value = await this.transaction(fn);
    observe((performance.now() - started) / 1000);
    return value;
  }

  /** A read: one snapshot, so a read of several statements sees one committed state. */
  private async read<T>(fn: (db: Db) => Promise<T>): Promise<T> {
    await this.ready;
    return this.transaction(fn, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
  }

  /** A Postgres database is backed up with its own tools; `keel backup` copies a SQLite file. */
  backup(_path: string): Promise<void> {
    return Promise.reject(
      new Error(
        "the store is a Postgres database: back it up with pg_dump (or your provider's backups); `keel backup` copies only a SQLite state.db",
      ),
    );
  }

  /** Never broken for good: a lost connection fails its calls, and the pool connects again. */
  failure(): Error | null {
    return null;
  }

  /** Waits for the migrations, then closes the pool; later calls reject. */
  async close(): Promise<void> {
    await this.ready.catch(() => {});
    await (await this.pool).end();
  }
}

/** A Postgres identifier, quoted (schema names come from tests and operators). */
function quoteIdent(name: string): string {
  return `"${name.replaceAll('"', '""')}"`;
}
