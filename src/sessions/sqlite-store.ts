/**
 * The SQLite implementation of Store (better-sqlite3, synchronous inside, one transaction per
 * method). Durability: WAL with synchronous=NORMAL, and no promise settles before an fsync of the
 * WAL (on the thread pool, see wal-sync.ts) covers every commit made before it, so whatever a
 * caller sees survives both a process crash and power loss (docs/architecture.md, "Durability").
 *
 * Group commit: the methods called within one turn of the event loop run in call order inside
 * one SQLite transaction, each in its own savepoint (a failing method undoes only its own
 * changes), and every promise settles only after that transaction has committed and been
 * flushed to disk. One fsync then covers many methods, and commits made while it runs share the
 * next one; "durable before the promise resolves" holds for each of them.
 *
 * This class is the engine: the connection, the migrations, the group commit and the WAL gate.
 * The SQL of each role is in the role's folder (inbox/sqlite.ts, turns/sqlite.ts, …).
 */
import { closeSync, mkdirSync, openSync } from "node:fs";
import { dirname } from "node:path";
import type Database from "better-sqlite3";
import { sqliteApprovals } from "./approvals/sqlite.js";
import { sqliteBudgets } from "./budgets/sqlite.js";
import { sqliteCluster } from "./cluster/sqlite.js";
import { sqliteInbox } from "./inbox/sqlite.js";
import { sqliteOutbox } from "./outbox/sqlite.js";
import { sqlitePairing } from "./pairing/sqlite.js";
import { sqlitePlatformData } from "./platform-data/sqlite.js";
import { sqliteReporting } from "./reporting/sqlite.js";
import { sqliteRetention } from "./retention/sqlite.js";
import { REWRITE_MARK_KEY, REWRITE_MARK_SQL } from "./retention/sqlite-remove.js";
import { sqliteSchedules } from "./schedules/sqlite.js";
import { sqliteSessionState } from "./session-state/sqlite.js";
import { openSqliteDatabase } from "./sqlite-database.js";
import { MIGRATIONS } from "./sqlite-migrations.js";
import type { SqliteContext } from "./sqlite-shared.js";
import type { CommitObserver, Store, StoreHandle } from "./store.js";
import { sqliteStreams } from "./streams/sqlite.js";
import { sqliteTasks } from "./tasks/sqlite.js";
import { TranscriptCache } from "./transcript-cache.js";
import { sqliteTurns } from "./turns/sqlite.js";
import { WalCheckpoint } from "./wal-checkpoint.js";
import { type FsyncFn, WalSync } from "./wal-sync.js";

export interface SqliteStoreOptions {
  /** Injected clock (epoch ms). */
  now?: () => number;
  /** Open without running migrations or writing (CLI inspection of a live gateway's db). */
  readonly?: boolean;
  /** The gateway using this store: inbox rows it accepts carry this id (as in PgStore). */
  instanceId?: string;
  /** How the WAL file is flushed to disk; default `fs.fsync` (tests hold or fail it). */
  fsync?: FsyncFn;
  /** Told how long each group commit took (the fsync after it excluded: that runs off-thread). */
  onCommit?: CommitObserver;
}

interface PendingTx {
  fn: () => unknown;
  /** False: settles once committed, without waiting for the disk (see startTurn). */
  durable: boolean;
  resolve(value: unknown): void;
  reject(err: unknown): void;
}

type Outcome = { ok: true; value: unknown } | { ok: false; error: unknown };

/**
 * Heap (estimated bytes) for transcripts kept parsed between turns: enough for the recent
 * sessions of a busy gateway; a compacted session holds at most its context window.
 */
const TRANSCRIPT_CACHE_BYTES = 6_000_000;
/** SQLite's page cache per connection, KiB (SQLite's own default; see the constructor). */
const PAGE_CACHE_KIB = 2000;

/**
 * The store's role methods come from the role modules (inbox/sqlite.ts, …), assigned in the
 * constructor from an object checked to hold every role.
 */
export interface SqliteStore extends Store {}

// biome-ignore lint/suspicious/noUnsafeDeclarationMerging: the roles are assigned in the constructor (see the interface).
export class SqliteStore {
  private readonly db: Database.Database;
  private readonly now: () => number;
  private readonly instanceId: string | null;
  /** Methods waiting for the next group commit, in call order. */
  private pending: PendingTx[] = [];
  private flushScheduled = false;
  private readonly statements = new Map<string, Database.Statement>();
  /** Seq order is commit order here (one writer), which the cache relies on. */
  private readonly transcripts = new TranscriptCache(TRANSCRIPT_CACHE_BYTES);
  /** Null where SQLite could not use a WAL (it then syncs each commit itself, synchronous=FULL). */
  private readonly wal: WalSync | null = null;
  /** The store's own checkpoints, off the event loop's path (wal-checkpoint.ts); with the WAL. */
  private readonly checkpoints: WalCheckpoint | null = null;
  /** SQLite's data_version when a read last looked: it moves when another connection commits. */
  private dataVersion = 0;
  /** The rewrite mark (retention/sqlite-remove.ts) last seen: another process pruned when it moves. */
  private rewriteMark: unknown = null;
  /**
   * The group commit's transactions, made once: better-sqlite3 builds a wrapper with four variants
   * for every `transaction()` call, which per method call was ~12 KB of garbage a turn.
   */
  private readonly commitBatch: Database.Transaction<(batch: PendingTx[]) => Outcome[]>;
  /** Nested in `commitBatch`: a savepoint, rolled back alone when its method throws. */
  private readonly runInSavepoint: Database.Transaction<(fn: () => unknown) => unknown>;
  private readonly onCommit: CommitObserver | null;

  constructor(path: string, options: SqliteStoreOptions = {}) {
    this.now = options.now ?? Date.now;
    this.instanceId = options.instanceId ?? null;
    this.onCommit = options.onCommit ?? null;
    if (!options.readonly) {
      mkdirSync(dirname(path), { recursive: true });
      // SQLite would create the file 0644, and its -wal and -shm copy the database file's mode:
      // a file created private here keeps every transcript private.
      closeSync(openSync(path, "a", 0o600));
    }
    this.db = openSqliteDatabase(path, {
      readonly: options.readonly ?? false,
      fileMustExist: options.readonly ?? false,
    });
    this.db.exec("PRAGMA busy_timeout = 5000");
    if (!options.readonly) {
      let databaseFile: string | null = null;
      if (this.db.pragma("journal_mode = WAL", { simple: true }) === "wal") {
        this.db.exec("PRAGMA synchronous = NORMAL");
        // SQLite's checkpoint would run inside a commit, fsyncs and all: this store runs its own.
        this.db.exec("PRAGMA wal_autocheckpoint = 0");
        // SQLite's own name for the file (symlinks resolved), not the one we were given.
        databaseFile = (this.stmt("PRAGMA main.database_list").get() as { file: string }).file;
        this.wal = new WalSync(`${databaseFile}-wal`, options.fsync);
        this.dataVersion = this.dataVersionNow();
      } else {
        this.db.exec("PRAGMA synchronous = FULL");
      }
      this.db.exec("PRAGMA foreign_keys = ON");
      // Temporary data in memory: each method's savepoint journal (and the sorts no index covers).
      // By default a journal past 64 KiB spilled to a temporary file, created and unlinked again:
      // 1.4 files a turn through /v1 (a new session's turn touches that many pages).
      this.db.exec("PRAGMA temp_store = MEMORY");
      // better-sqlite3 raises SQLite's page cache to 16 MB, which a growing database fills and
      // keeps: SQLite's own 2 MB holds the hot pages (indexes' tails, recent rows), the OS page
      // cache the rest, and parsed transcripts are kept above (TranscriptCache).
      this.db.exec(`PRAGMA cache_size = -${PAGE_CACHE_KIB}`);
      this.migrate();
      if (this.wal && databaseFile) {
        this.checkpoints = this.walCheckpoint(databaseFile, this.wal, options.fsync);
      }
    }
    this.runInSavepoint = this.db.transaction((fn: () => unknown) => fn());
    this.commitBatch = this.db.transaction((batch: PendingTx[]) =>
      batch.map((item): Outcome => {
        try {
          return { ok: true, value: this.runInSavepoint(item.fn) };
        } catch (error) {
          return { ok: false, error };
        }
      }),
    );
    const s: SqliteContext = {
      stmt: (sql) => this.stmt(sql),
      read: (fn) => this.read(fn),
      tx: (fn, durable) => this.tx(fn, durable),
      untilDurable: () => this.untilDurable(),
      now: this.now,
      instanceId: this.instanceId,
      transcripts: this.transcripts,
    };
    const roles: Omit<Store, keyof StoreHandle> = {
      ...sqliteInbox(s),
      ...sqliteSessionState(s),
      ...sqliteTurns(s),
      ...sqliteOutbox(s),
      ...sqliteStreams(s),
      ...sqliteTasks(s),
      ...sqliteApprovals(s),
      ...sqliteBudgets(s),
      ...sqlitePairing(s),
      ...sqlitePlatformData(s),
      ...sqliteSchedules(s),
      ...sqliteCluster(s),
      ...sqliteReporting(s),
      ...sqliteRetention(s),
    };
    Object.assign(this, roles);
  }

  private walCheckpoint(file: string, wal: WalSync, fsyncFile: FsyncFn | undefined): WalCheckpoint {
    const pin = openSqliteDatabase(file, { readonly: true, fileMustExist: true });
    return new WalCheckpoint({
      db: this.db,
      pin,
      path: file,
      wal,
      untilFlushed: () => {
        this.noteOtherCommits(wal);
        return wal.untilDurable();
      },
      resumeCommits: () => this.scheduleFlush(),
      ...(fsyncFile && { fsyncFile }),
    });
  }

  /** Schema version after migrations (for doctor and tests). */
  schemaVersion(): number {
    return this.stmt("PRAGMA user_version").pluck().get() as number;
  }

  /**
   * Runs the migrations not applied yet, each in an IMMEDIATE transaction that reads the version
   * under the write lock: another process opening the same database at the same moment (a
   * `keel schedule` command while the gateway starts) waits for it instead of applying it twice.
   */
  private migrate(): void {
    while (
      this.db
        .transaction(() => {
          const v = this.schemaVersion();
          if (v >= MIGRATIONS.length) return false;
          this.db.exec(MIGRATIONS[v]!);
          this.db.exec(`PRAGMA user_version = ${v + 1}`);
          return true;
        })
        .immediate()
    );
  }

  /** A prepared statement, compiled once per SQL text (preparing is a large part of a call's cost). */
  private stmt(sql: string): Database.Statement {
    let statement = this.statements.get(sql);
    if (!statement) {
      statement = this.db.prepare(sql);
      this.statements.set(sql, statement);
    }
    return statement;
  }

  /**
   * Runs a read at once, outside the group commit: it sees everything committed so far, which
   * includes every write a caller has awaited. Its answer waits until what it may have seen is on
   * disk (at once when nothing is being flushed).
   */
  private read<T>(fn: () => T): Promise<T> {
    try {
      if (!this.wal) return Promise.resolve(fn());
      if (this.wal.failed) throw this.wal.failed;
      // Before the read too: a `keel prune` or `keel user forget` may have rewritten transcripts
      // this process holds parsed (noteOtherCommits then drops them).
      this.noteOtherCommits(this.wal);
      const value = fn();
      this.noteOtherCommits(this.wal);
      const durable = this.wal.untilReadable();
      return durable ? durable.then(() => value) : Promise.resolve(value);
    } catch (err) {
      return Promise.reject(err);
    }
  }

  /**
   * Another connection (a `keel` command) may have committed what a read saw without its fsync
   * done yet: SQLite's data_version moves with every commit but this connection's, and the gate
   * then counts one commit to flush.
   */
  private noteOtherCommits(wal: WalSync): void {
    const version = this.dataVersionNow();
    if (version !== this.dataVersion) {
      this.dataVersion = version;
      // Pruning or erasure in another process (`keel prune`, `keel user forget`) rewrote
      // transcripts this process may hold parsed: drop them (appends need nothing, see read).
      const mark = this.stmt(REWRITE_MARK_SQL).pluck().get(REWRITE_MARK_KEY) ?? null;
      if (mark !== this.rewriteMark) {
        this.rewriteMark = mark;
        this.transcripts.clear();
      }
      wal.committedOne();
    }
  }

  /** SQLite's count of commits other connections made to the file (this one's do not move it). */
  private dataVersionNow(): number {
    return this.stmt("PRAGMA data_version").pluck().get() as number;
  }

  /**
   * Runs `fn` in the next group commit; settles once that transaction is committed and on disk,
   * or only committed when `durable` is false.
   */
  private tx<T>(fn: () => T, durable = true): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.pending.push({ fn, durable, resolve: resolve as (value: unknown) => void, reject });
      this.scheduleFlush();
    });
  }

  /** Handled here too: a caller that drops it (it failed first) leaves no unhandled rejection. */
  private untilDurable(): Promise<void> {
    const onDisk = this.wal?.untilDurable() ?? Promise.resolve();
    onDisk.catch(() => undefined);
    return onDisk;
  }

  private scheduleFlush(): void {
    if (this.flushScheduled || this.pending.length === 0) return;
    this.flushScheduled = true;
    setImmediate(() => this.flush());
  }

  private flush(): void {
    this.flushScheduled = false;
    // Held while a checkpoint runs; it schedules the flush again when done.
    if (this.checkpoints?.holdsCommits) return;
    const batch = this.pending;
    this.pending = [];
    if (batch.length === 0) return;
    if (this.wal?.failed) {
      for (const item of batch) item.reject(this.wal.failed);
      return;
    }
    let outcomes: Outcome[];
    try {
      const started = this.onCommit ? performance.now() : 0;
      outcomes = this.commitBatch.immediate(batch);
      this.onCommit?.((performance.now() - started) / 1000);
    } catch (err) {
      // Nothing of this batch was committed (or the database is closed).
      for (const item of batch) item.reject(err);
      return;
    }
    this.wal?.committedOne(batch.some((item) => item.durable));
    this.checkpoints?.afterCommit();
    // Each call waits on its own, so that one fsync's callers are continued a few at a time.
    batch.forEach((item, i) => {
      const outcome = outcomes[i]!;
      const settle = () => {
        if (outcome.ok) item.resolve(outcome.value);
        else item.reject(outcome.error);
      };
      const durable = item.durable ? this.wal?.untilDurable() : undefined;
      if (!durable) settle();
      else durable.then(settle, item.reject);
    });
  }

  /**
   * A consistent copy through `VACUUM INTO` (a read transaction; writers go on). Not
   * better-sqlite3's backup(): its Backup object, once garbage-collected, aborts the process on
   * Node 24 (see sqlite-database.ts). The target must not exist or be empty.
   */
  async backup(path: string): Promise<void> {
    this.stmt("VACUUM INTO ?").run(path);
  }

  failure(): Error | null {
    return this.wal?.failed ?? null;
  }

  /**
   * Commits what is already queued, closes, and settles once it is on disk; later calls reject
   * (the database is closed).
   */
  async close(): Promise<void> {
    // A failed store stays open: closing the last connection checkpoints the WAL into state.db,
    // which would copy pages the failed fsync may have lost. The process is about to exit, and
    // the next one reads the WAL as the disk holds it.
    if (this.db.open && !this.wal?.failed) {
      await this.checkpoints?.close();
      // Checked again: the last checkpoint's flush may have failed meanwhile.
      if (!this.wal?.failed) {
        this.flush();
        this.db.close();
        this.checkpoints?.release();
      }
    }
    await this.wal?.close();
  }
}
