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
 */
import { closeSync, mkdirSync, openSync } from "node:fs";
import { dirname } from "node:path";
import type Database from "better-sqlite3";
import type { ChatMessage } from "../agent/types.js";
import type { ChatAddress, InboundMessage } from "../platforms/platform.js";
import {
  INTERNAL_KEY_PREFIX,
  newPairingCode,
  newSessionId,
  noticeSessionKey,
} from "./session-id.js";
import {
  decideApprovalSync,
  findApprovalForCallSync,
  getApprovalSync,
  hasApprovalGrantsSync,
  listApprovalsSync,
  listUnappliedDecisionsSync,
  requestApprovalSync,
} from "./sqlite-approvals.js";
import { openSqliteDatabase } from "./sqlite-database.js";
import { MIGRATIONS } from "./sqlite-migrations.js";
import type {
  AcceptInboundResult,
  ApprovalDecisionInput,
  ApprovalFilter,
  ApprovalRecord,
  ApprovalRequestInput,
  CompactionInput,
  CompactionRecord,
  FinishTurnInput,
  IdempotencyRecord,
  InboxAnswer,
  InboxItem,
  InstanceInput,
  InstanceRecord,
  LeaseToken,
  MediaStepInput,
  OnceNoticeInput,
  OutboxInput,
  OutboxItem,
  PairingRequest,
  PairingRequestInput,
  RecentChat,
  RequestNoticeInput,
  ResumeReason,
  ScheduleAdvance,
  ScheduleJob,
  ScheduleJobInput,
  SentFile,
  SessionLease,
  SessionRecord,
  SessionSummary,
  StartedTurn,
  StartTurnInput,
  Store,
  StreamMessage,
  StreamTurn,
  ToolFinishInput,
  ToolStartInput,
  TurnHistory,
  TurnRecord,
  TurnState,
  UsageInput,
  UsageTotals,
} from "./store.js";
import {
  InboxItemTakenError,
  LeaseLostError,
  ScheduleChangedError,
  ScheduleNameTakenError,
} from "./store.js";
import {
  type CompactionRow,
  type InboxRow,
  type InstanceRow,
  type MessageRow,
  type OutboxRow,
  type PairingRow,
  type ScheduleJobRow,
  type SessionLeaseRow,
  type SessionRow,
  type SessionSummaryRow,
  type StreamMessageRow,
  type ToolCallRow,
  type TurnRow,
  toCompaction,
  toInbox,
  toInstance,
  toOutbox,
  toPairing,
  toScheduleJob,
  toSession,
  toSessionLease,
  toSessionSummary,
  toStoredMessage,
  toStreamMessage,
  toToolCall,
  toTurn,
} from "./store-rows.js";
import { TranscriptCache } from "./transcript-cache.js";
import { WalCheckpoint } from "./wal-checkpoint.js";
import { type FsyncFn, WalSync } from "./wal-sync.js";

/** How long finished stream messages are kept (a reply's delivery never takes that long). */
const STREAM_RETENTION_MS = 7 * 24 * 3600 * 1000;

export interface SqliteStoreOptions {
  /** Injected clock (epoch ms). */
  now?: () => number;
  /** Open without running migrations or writing (CLI inspection of a live gateway's db). */
  readonly?: boolean;
  /** The gateway using this store: inbox rows it accepts carry this id (as in PgStore). */
  instanceId?: string;
  /** How the WAL file is flushed to disk; default `fs.fsync` (tests hold or fail it). */
  fsync?: FsyncFn;
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

export class SqliteStore implements Store {
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
  /**
   * The group commit's transactions, made once: better-sqlite3 builds a wrapper with four variants
   * for every `transaction()` call, which per method call was ~12 KB of garbage a turn.
   */
  private readonly commitBatch: Database.Transaction<(batch: PendingTx[]) => Outcome[]>;
  /** Nested in `commitBatch`: a savepoint, rolled back alone when its method throws. */
  private readonly runInSavepoint: Database.Transaction<(fn: () => unknown) => unknown>;

  constructor(path: string, options: SqliteStoreOptions = {}) {
    this.now = options.now ?? Date.now;
    this.instanceId = options.instanceId ?? null;
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
      outcomes = this.commitBatch.immediate(batch);
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

  private sessionRow(key: string): SessionRow | undefined {
    return this.stmt("SELECT * FROM sessions WHERE key = ?").get(key) as SessionRow | undefined;
  }

  /** `credential` is recorded only when this creates the row. */
  private ensureSessionSync(
    key: string,
    origin: ChatAddress | null,
    credential?: string,
  ): SessionRow {
    const existing = this.sessionRow(key);
    if (existing) return existing;
    const now = this.now();
    const sessionId = newSessionId(now);
    const platform = origin?.platform ?? null;
    this.stmt(
      `INSERT INTO sessions (key, session_id, platform, origin, credential, created_at, updated_at)
         VALUES (?, ?, ?, ?, ?, ?, ?)`,
    ).run(
      key,
      sessionId,
      platform,
      origin ? JSON.stringify(origin) : null,
      credential ?? null,
      now,
      now,
    );
    this.stmt(
      "INSERT INTO transcripts (session_id, session_key, platform, created_at) VALUES (?, ?, ?, ?)",
    ).run(sessionId, key, platform, now);
    return this.sessionRow(key)!;
  }

  acceptInbound(message: InboundMessage, advance?: ScheduleAdvance): Promise<AcceptInboundResult> {
    return this.tx(() => {
      if (advance) this.advanceScheduleJob(advance);
      const now = this.now();
      const claim = message.idempotency;
      if (claim) {
        this.stmt("DELETE FROM idempotency_keys WHERE expires_at <= ?").run(now);
        const seen = this.idempotencyRow(claim.scope, claim.key, now);
        // Checked before anything is written: a repeat must not even create its session.
        if (seen) {
          return {
            accepted: false,
            item: toInbox(seen),
            ...(seen.request_hash !== claim.requestHash && { idempotencyConflict: true }),
          };
        }
      }
      const session = this.ensureSessionSync(
        message.sessionKey,
        message.address,
        message.credential,
      );
      const inserted = this.stmt(
        `INSERT INTO inbox (platform, chat_id, platform_message_id, session_key, session_id, text,
             sender_id, sender_name, address, operator, state, received_at, attachments,
             accepted_by, client_tools, thread)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending', ?, ?, ?, ?, ?)
           ON CONFLICT (platform, chat_id, platform_message_id) DO NOTHING`,
      ).run(
        message.platform,
        message.chatId,
        message.platformMessageId,
        message.sessionKey,
        session.session_id,
        message.text,
        message.senderId ?? null,
        message.senderName ?? null,
        JSON.stringify(message.address),
        message.operator ? 1 : 0,
        now,
        message.attachments?.length ? JSON.stringify(message.attachments) : null,
        this.instanceId,
        message.clientTools ? JSON.stringify(message.clientTools) : null,
        message.thread ?? null,
      );
      if (inserted.changes === 1) {
        // The origin moves when a turn starts (startTurn), not here: a command such as /restart
        // must not become the message a resumed reply answers.
        this.stmt("UPDATE sessions SET updated_at = ? WHERE key = ?").run(now, message.sessionKey);
        if (message.history?.length && !this.hasMessages(session.session_id)) {
          this.appendSync(session.session_id, null, message.history);
        }
      }
      const row = this.stmt(
        "SELECT * FROM inbox WHERE platform = ? AND chat_id = ? AND platform_message_id = ?",
      ).get(message.platform, message.chatId, message.platformMessageId) as InboxRow;
      if (claim && inserted.changes === 1) {
        this.stmt(
          `INSERT INTO idempotency_keys
               (scope, idempotency_key, request_hash, inbox_id, created_at, expires_at)
             VALUES (?, ?, ?, ?, ?, ?)`,
        ).run(claim.scope, claim.key, claim.requestHash, row.id, now, now + claim.ttlMs);
      }
      return { accepted: inserted.changes === 1, item: toInbox(row) };
    });
  }

  /** The live key's row joined with its inbox item. */
  private idempotencyRow(
    scope: string,
    key: string,
    now: number,
  ): (InboxRow & { request_hash: string; expires_at: number }) | undefined {
    return this.stmt(
      `SELECT i.*, k.request_hash, k.expires_at FROM idempotency_keys k
         JOIN inbox i ON i.id = k.inbox_id
         WHERE k.scope = ? AND k.idempotency_key = ? AND k.expires_at > ?`,
    ).get(scope, key, now) as (InboxRow & { request_hash: string; expires_at: number }) | undefined;
  }

  findIdempotencyKey(scope: string, key: string): Promise<IdempotencyRecord | null> {
    return this.read(() => {
      const row = this.idempotencyRow(scope, key, this.now());
      return row
        ? { requestHash: row.request_hash, item: toInbox(row), expiresAt: row.expires_at }
        : null;
    });
  }

  findThread(thread: string): Promise<{ sessionKey: string; sessionId: string } | null> {
    return this.read(() => {
      const row = this.stmt(
        "SELECT session_key, session_id FROM inbox WHERE thread = ? ORDER BY id DESC LIMIT 1",
      ).get(thread) as { session_key: string; session_id: string } | undefined;
      return row ? { sessionKey: row.session_key, sessionId: row.session_id } : null;
    });
  }

  findInboxAnswer(inboxId: number): Promise<InboxAnswer> {
    return this.read(() => {
      const item = this.stmt("SELECT * FROM inbox WHERE id = ?").get(inboxId) as
        | InboxRow
        | undefined;
      if (!item) return { state: "unrecorded" };
      const open: InboxAnswer = { state: "open", sessionKey: item.session_key };
      if (item.state === "pending" || item.state === "running") return open;
      let turn = this.stmt("SELECT * FROM turns WHERE inbox_id = ? ORDER BY id LIMIT 1").get(
        inboxId,
      ) as TurnRow | undefined;
      if (!turn) {
        const notice = this.stmt(
          "SELECT text FROM outbox WHERE inbox_id = ? ORDER BY id LIMIT 1",
        ).get(inboxId) as { text: string } | undefined;
        return notice
          ? { state: "answered", outcome: "notice", text: notice.text }
          : { state: "unrecorded" };
      }
      // Bounded by the number of turns in the transcript; each step moves to a later turn.
      for (;;) {
        if (turn.state === "running") return open;
        if (turn.state === "done" || turn.state === "failed") {
          const reply = this.stmt(
            "SELECT text FROM outbox WHERE turn_id = ? AND kind = 'reply' ORDER BY id LIMIT 1",
          ).get(turn.id) as { text: string } | undefined;
          const outcome = turn.state === "done" ? "reply" : "failed";
          return { state: "answered", outcome, text: reply?.text ?? "" };
        }
        // Cut off. The next turn of the same transcript continues it when it brought no new
        // message (a resume after a restart, or a /retry of it); a new message supersedes it.
        const next = this.stmt(
          "SELECT * FROM turns WHERE session_id = ? AND id > ? ORDER BY id LIMIT 1",
        ).get(turn.session_id, turn.id) as TurnRow | undefined;
        if (next && next.inbox_id === null) {
          turn = next;
          continue;
        }
        const session = this.sessionRow(turn.session_key);
        const awaitingResume =
          !next && session?.session_id === turn.session_id && session.resume_pending === 1;
        return awaitingResume ? open : { state: "answered", outcome: "interrupted", text: "" };
      }
    });
  }

  /** Moves a job's cursor past the slot being fired (or retires a one-shot); part of acceptInbound. */
  private advanceScheduleJob(advance: ScheduleAdvance): void {
    if (!this.moveScheduleCursor(advance)) throw new ScheduleChangedError(advance.jobId);
  }

  /** Compare-and-set of a job's cursor (null deletes the job); false when it no longer matches. */
  private moveScheduleCursor(
    advance: Pick<ScheduleAdvance, "jobId" | "expectedNextFireAt" | "nextFireAt"> &
      Partial<Pick<ScheduleAdvance, "firedSlot" | "lateMs">>,
  ): boolean {
    const now = this.now();
    const params = [advance.jobId, advance.expectedNextFireAt] as const;
    const changes =
      advance.nextFireAt === null
        ? this.stmt(
            "DELETE FROM schedule_jobs WHERE id = ? AND next_fire_at = ? AND paused = 0",
          ).run(...params).changes
        : this.stmt(
            `UPDATE schedule_jobs SET next_fire_at = ?, last_fire_at = COALESCE(?, last_fire_at),
                 last_fired_late_ms = COALESCE(?, last_fired_late_ms), updated_at = ?
               WHERE id = ? AND next_fire_at = ? AND paused = 0`,
          ).run(
            advance.nextFireAt,
            advance.firedSlot ?? null,
            advance.lateMs ?? null,
            now,
            ...params,
          ).changes;
    return changes === 1;
  }

  skipScheduleSlots(
    jobId: number,
    expectedNextFireAt: number,
    nextFireAt: number | null,
  ): Promise<boolean> {
    return this.tx(() => this.moveScheduleCursor({ jobId, expectedNextFireAt, nextFireAt }));
  }

  getPlatformState(key: string): Promise<unknown> {
    return this.read(() => {
      const row = this.stmt("SELECT value FROM platform_state WHERE key = ?").get(key) as
        | { value: string }
        | undefined;
      return row ? (JSON.parse(row.value) as unknown) : null;
    });
  }

  setPlatformState(key: string, value: unknown): Promise<void> {
    return this.tx(() => {
      if (value === null) {
        this.stmt("DELETE FROM platform_state WHERE key = ?").run(key);
        return;
      }
      this.stmt(
        `INSERT INTO platform_state (key, value, updated_at) VALUES (?, ?, ?)
           ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at`,
      ).run(key, JSON.stringify(value), this.now());
    });
  }

  listRecentChats(platform: string, sinceMs: number): Promise<RecentChat[]> {
    return this.read(() => {
      const rows = this.stmt(
        `SELECT i.chat_id, i.platform_message_id, i.received_at FROM inbox i
           JOIN (SELECT MAX(id) AS id FROM inbox WHERE platform = ? AND received_at >= ?
                   GROUP BY chat_id) latest ON latest.id = i.id
           ORDER BY i.id`,
      ).all(platform, sinceMs) as {
        chat_id: string;
        platform_message_id: string;
        received_at: number;
      }[];
      return rows.map((r) => ({
        chatId: r.chat_id,
        lastMessageId: r.platform_message_id,
        receivedAt: r.received_at,
      }));
    });
  }

  hasOpenInbox(platform: string, chatId: string): Promise<boolean> {
    return this.read(
      () =>
        this.stmt(
          `SELECT 1 FROM inbox WHERE platform = ? AND chat_id = ? AND state IN ('pending', 'running')
             LIMIT 1`,
        ).get(platform, chatId) !== undefined,
    );
  }

  listOpenInbox(): Promise<InboxItem[]> {
    return this.read(() =>
      (
        this.stmt(
          "SELECT * FROM inbox WHERE state IN ('pending', 'running') ORDER BY id",
        ).all() as InboxRow[]
      ).map(toInbox),
    );
  }

  adoptPendingInbox(
    owner: string,
    staleMs: number,
    options: { includeOwn?: boolean } = {},
  ): Promise<InboxItem[]> {
    return this.tx(() =>
      (
        this.stmt(
          `UPDATE inbox SET accepted_by = ?
             WHERE state = 'pending' AND (
               (? AND (accepted_by IS NULL OR accepted_by = ?))
               OR (accepted_by <> ? AND NOT EXISTS (
                 SELECT 1 FROM instances i
                   WHERE i.id = inbox.accepted_by AND i.heartbeat_at > ?)))
             RETURNING *`,
        ).all(owner, options.includeOwn ? 1 : 0, owner, owner, this.now() - staleMs) as InboxRow[]
      )
        .sort((a, b) => a.id - b.id)
        .map(toInbox),
    );
  }

  closeInboxItem(
    inboxId: number,
    state: "done" | "cancelled",
    notice?: string,
  ): Promise<OutboxItem | null> {
    return this.tx(() => {
      this.stmt("UPDATE inbox SET state = ? WHERE id = ?").run(state, inboxId);
      if (state === "cancelled")
        this.stmt("DELETE FROM idempotency_keys WHERE inbox_id = ?").run(inboxId);
      if (notice === undefined) return null;
      const row = this.stmt("SELECT * FROM inbox WHERE id = ?").get(inboxId) as
        | InboxRow
        | undefined;
      if (!row) throw new Error(`unknown inbox item ${inboxId}`);
      const session = this.ensureSessionSync(
        row.session_key,
        JSON.parse(row.address) as ChatAddress,
      );
      return this.insertOutbox(
        row.session_key,
        session.session_id,
        null,
        JSON.parse(row.address) as ChatAddress,
        notice,
        "notice",
        "pending",
        inboxId,
      );
    });
  }

  getSession(key: string): Promise<SessionRecord | null> {
    return this.read(() => {
      const row = this.sessionRow(key);
      return row ? toSession(row) : null;
    });
  }

  getSessionById(sessionId: string): Promise<SessionRecord | null> {
    return this.read(() => {
      const row = this.stmt("SELECT * FROM sessions WHERE session_id = ?").get(sessionId) as
        | SessionRow
        | undefined;
      if (row) return toSession(row);
      // A transcript left behind by /new: report it under its key with the old id.
      const t = this.stmt("SELECT * FROM transcripts WHERE session_id = ?").get(sessionId) as
        | { session_key: string; created_at: number }
        | undefined;
      if (!t) return null;
      const current = this.sessionRow(t.session_key);
      return current ? { ...toSession(current), sessionId, resumePending: false } : null;
    });
  }

  ensureSession(key: string, origin: ChatAddress | null): Promise<SessionRecord> {
    return this.tx(() => toSession(this.ensureSessionSync(key, origin)));
  }

  resetSession(key: string): Promise<SessionRecord> {
    return this.tx(() => this.resetSessionSync(key));
  }

  private resetSessionSync(key: string): SessionRecord {
    const existing = this.ensureSessionSync(key, null);
    const now = this.now();
    const sessionId = newSessionId(now);
    this.stmt(
      `UPDATE sessions SET session_id = ?, resume_pending = 0, resume_reason = NULL,
           resume_marked_at = NULL, interrupt_count = 0, suspended = 0, request_notice = NULL,
           updated_at = ? WHERE key = ?`,
    ).run(sessionId, now, key);
    const platform = existing.origin ? (JSON.parse(existing.origin) as ChatAddress).platform : null;
    this.stmt(
      "INSERT INTO transcripts (session_id, session_key, platform, created_at) VALUES (?, ?, ?, ?)",
    ).run(sessionId, key, platform, now);
    return toSession(this.sessionRow(key)!);
  }

  listSessions(
    options: { limit?: number; platform?: string; internal?: boolean } = {},
  ): Promise<SessionSummary[]> {
    return this.read(() => {
      const rows = this.stmt(
        `SELECT s.key, s.session_id, s.platform, s.resume_pending, s.suspended, s.updated_at,
             (SELECT COUNT(*) FROM messages m WHERE m.session_id = s.session_id) AS message_count,
             (SELECT body FROM messages m WHERE m.session_id = s.session_id ORDER BY seq DESC LIMIT 1) AS last_body
           FROM sessions s
           WHERE (? IS NULL OR s.platform = ?) AND (? = 1 OR substr(s.key, 1, ?) <> ?)
           ORDER BY s.updated_at DESC LIMIT ?`,
      ).all(
        options.platform ?? null,
        options.platform ?? null,
        options.internal === false ? 0 : 1,
        INTERNAL_KEY_PREFIX.length,
        INTERNAL_KEY_PREFIX,
        options.limit ?? 100,
      ) as SessionSummaryRow[];
      return rows.map(toSessionSummary);
    });
  }

  loadTranscript(sessionId: string, afterSeq = 0) {
    return this.read(() => this.transcriptSync(sessionId, afterSeq));
  }

  loadTurnHistory(sessionId: string): Promise<TurnHistory> {
    return this.read(() => {
      const row = this.latestCompactionSync(sessionId);
      const compaction = row ? toCompaction(row) : null;
      return {
        compaction,
        messages: this.transcriptSync(sessionId, compaction?.throughSeq ?? 0),
        unfinished: this.unfinishedToolCallsSync(sessionId),
      };
    });
  }

  private transcriptSync(sessionId: string, afterSeq: number) {
    return this.transcripts.read(sessionId, afterSeq, (seq) =>
      (
        this.stmt(
          "SELECT seq, turn_id, body, created_at FROM messages WHERE session_id = ? AND seq > ? ORDER BY seq",
        ).all(sessionId, seq) as MessageRow[]
      ).map((row) => ({ message: toStoredMessage(row), chars: row.body.length })),
    );
  }

  private hasMessages(sessionId: string): boolean {
    return (
      this.stmt("SELECT 1 FROM messages WHERE session_id = ? LIMIT 1").get(sessionId) !== undefined
    );
  }

  private appendSync(sessionId: string, turnId: number | null, messages: ChatMessage[]): void {
    const insert = this.stmt(
      "INSERT INTO messages (session_id, turn_id, role, body, created_at) VALUES (?, ?, ?, ?, ?)",
    );
    const now = this.now();
    for (const m of messages) insert.run(sessionId, turnId, m.role, JSON.stringify(m), now);
  }

  appendMessages(
    sessionId: string,
    turnId: number | null,
    messages: ChatMessage[],
    closeInboxIds: number[] = [],
    usage?: UsageInput,
    lease?: LeaseToken,
  ): Promise<void> {
    return this.tx(() => {
      this.checkLease(lease);
      this.appendSync(sessionId, turnId, messages);
      const close = this.stmt("UPDATE inbox SET state = 'done' WHERE id = ?");
      for (const id of closeInboxIds) close.run(id);
      if (usage) this.insertUsage(sessionId, turnId, "turn", usage);
    });
  }

  private insertUsage(
    sessionId: string,
    turnId: number | null,
    purpose: "turn" | "compaction",
    usage: UsageInput,
  ): void {
    this.stmt(
      `INSERT INTO model_usage (session_id, turn_id, model, purpose, prompt_tokens,
           completion_tokens, estimated, created_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
    ).run(
      sessionId,
      turnId,
      usage.model,
      purpose,
      Math.round(usage.promptTokens),
      Math.round(usage.completionTokens),
      usage.estimated ? 1 : 0,
      this.now(),
    );
  }

  recordCompaction(input: CompactionInput): Promise<CompactionRecord> {
    return this.tx(() => {
      const latest = this.latestCompactionSync(input.sessionId);
      if (latest && input.throughSeq <= latest.through_seq) {
        throw new Error(
          `compaction through message ${input.throughSeq} does not go past the latest one (${latest.through_seq})`,
        );
      }
      const { lastInsertRowid } = this.stmt(
        `INSERT INTO compactions (session_id, turn_id, through_seq, summary, tokens_before,
             tokens_after, created_at)
           VALUES (?, ?, ?, ?, ?, ?, ?)`,
      ).run(
        input.sessionId,
        input.turnId,
        input.throughSeq,
        input.summary,
        Math.round(input.tokensBefore),
        Math.round(input.tokensAfter),
        this.now(),
      );
      if (input.usage) this.insertUsage(input.sessionId, input.turnId, "compaction", input.usage);
      return toCompaction(
        this.stmt("SELECT * FROM compactions WHERE id = ?").get(lastInsertRowid) as CompactionRow,
      );
    });
  }

  private latestCompactionSync(sessionId: string): CompactionRow | undefined {
    return this.stmt("SELECT * FROM compactions WHERE session_id = ? ORDER BY id DESC LIMIT 1").get(
      sessionId,
    ) as CompactionRow | undefined;
  }

  latestCompaction(sessionId: string): Promise<CompactionRecord | null> {
    return this.read(() => {
      const row = this.latestCompactionSync(sessionId);
      return row ? toCompaction(row) : null;
    });
  }

  sessionUsage(sessionId: string): Promise<UsageTotals> {
    return this.read(() => {
      const totals = this.stmt(
        `SELECT COUNT(*) AS calls, COALESCE(SUM(prompt_tokens), 0) AS prompt,
             COALESCE(SUM(completion_tokens), 0) AS completion,
             COALESCE(SUM(estimated), 0) AS estimated
           FROM model_usage WHERE session_id = ?`,
      ).get(sessionId) as { calls: number; prompt: number; completion: number; estimated: number };
      const last = this.stmt(
        `SELECT prompt_tokens FROM model_usage WHERE session_id = ? AND purpose = 'turn'
           ORDER BY id DESC LIMIT 1`,
      ).get(sessionId) as { prompt_tokens: number } | undefined;
      return {
        calls: totals.calls,
        promptTokens: totals.prompt,
        completionTokens: totals.completion,
        estimatedCalls: totals.estimated,
        lastPromptTokens: last?.prompt_tokens ?? null,
      };
    });
  }

  setSessionModel(key: string, model: string | null): Promise<void> {
    return this.tx(() => {
      this.ensureSessionSync(key, null);
      this.stmt("UPDATE sessions SET model = ? WHERE key = ?").run(model, key);
    });
  }

  startTurn(input: StartTurnInput): Promise<StartedTurn> {
    return this.tx(() => {
      this.checkLease(input.lease);
      if (
        input.inboxId !== null &&
        this.stmt("UPDATE inbox SET state = 'running' WHERE id = ? AND state = 'pending'").run(
          input.inboxId,
        ).changes === 0
      ) {
        throw new InboxItemTakenError(input.inboxId);
      }
      const now = this.now();
      let session = this.touchSessionSync(input, now);
      if (input.clientTools !== undefined) {
        session = this.stmt("UPDATE sessions SET client_tools = ? WHERE key = ? RETURNING *").get(
          input.clientTools?.length ? JSON.stringify(input.clientTools) : null,
          input.sessionKey,
        ) as SessionRow;
      }
      const turn = this.stmt(
        `INSERT INTO turns (session_key, session_id, inbox_id, state, started_at)
           VALUES (?, ?, ?, 'running', ?) RETURNING *`,
      ).get(input.sessionKey, session.session_id, input.inboxId, now) as TurnRow;
      const input_ = [
        ...(input.userMessage ? [input.userMessage] : []),
        ...(input.inputMessages ?? []),
      ];
      if (input_.length > 0) this.appendSync(session.session_id, turn.id, input_);
      return { ...toTurn(turn), session: toSession(session) };
    }, false);
  }

  /**
   * A starting turn's session, created if new, with the turn's origin and memory user (each when
   * given) and the time: one statement where the session exists (every turn but its first).
   */
  private touchSessionSync(input: StartTurnInput, now: number): SessionRow {
    const touch = () =>
      this.stmt(
        `UPDATE sessions SET origin = COALESCE(?, origin), memory_user = COALESCE(?, memory_user),
             updated_at = ?
           WHERE key = ? RETURNING *`,
      ).get(
        input.origin ? JSON.stringify(input.origin) : null,
        input.memoryUser || null,
        now,
        input.sessionKey,
      ) as SessionRow | undefined;
    const touched = touch();
    if (touched) return touched;
    this.ensureSessionSync(input.sessionKey, null);
    return touch()!;
  }

  finishTurn(input: FinishTurnInput): Promise<OutboxItem | null> {
    return this.tx(() => {
      this.checkLease(input.lease);
      const now = this.now();
      const turn = this.stmt(
        "UPDATE turns SET state = ?, finished_at = ? WHERE id = ? RETURNING *",
      ).get(input.state, now, input.turnId) as TurnRow | undefined;
      if (!turn) throw new Error(`unknown turn ${input.turnId}`);
      if (turn.inbox_id !== null) {
        this.stmt("UPDATE inbox SET state = 'done' WHERE id = ?").run(turn.inbox_id);
      }
      if (input.finalMessage) this.appendSync(turn.session_id, input.turnId, [input.finalMessage]);
      if (input.usage) this.insertUsage(turn.session_id, input.turnId, "turn", input.usage);
      if (input.state === "done") {
        // A finished turn ends the interruption streak and any pending resume.
        this.stmt(
          `UPDATE sessions SET interrupt_count = 0, resume_pending = 0, resume_reason = NULL,
               resume_marked_at = NULL, request_notice = NULL, updated_at = ?
             WHERE key = ? AND session_id = ?`,
        ).run(now, turn.session_key, turn.session_id);
      }
      if (!input.reply) return null;
      return this.insertOutbox(
        turn.session_key,
        turn.session_id,
        input.turnId,
        input.reply.address,
        input.reply.text,
        "reply",
        input.reply.inBand ? "delivered" : "pending",
        null,
        input.reply.approvalId ?? null,
      );
    });
  }

  private insertOutbox(
    sessionKey: string,
    sessionId: string,
    turnId: number | null,
    address: ChatAddress,
    text: string,
    kind: "reply" | "notice",
    /** `delivered`: a record of a reply answered in band (FinishTurnInput.reply.inBand). */
    state: "pending" | "sending" | "delivered" = "pending",
    /** The inbox item this notice answers (it closed the item without a turn). */
    inboxId: number | null = null,
    approvalId: string | null = null,
  ): OutboxItem {
    const now = this.now();
    const { lastInsertRowid } = this.stmt(
      `INSERT INTO outbox (session_key, session_id, turn_id, platform, address, text, kind, state,
           created_at, delivered_at, inbox_id, approval_id, queued_by)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    ).run(
      sessionKey,
      sessionId,
      turnId,
      address.platform,
      JSON.stringify(address),
      text,
      kind,
      state,
      now,
      state === "delivered" ? now : null,
      inboxId,
      approvalId,
      this.instanceId,
    );
    return toOutbox(
      this.stmt("SELECT * FROM outbox WHERE id = ?").get(lastInsertRowid) as OutboxRow,
    );
  }

  listRunningTurns(): Promise<TurnRecord[]> {
    return this.read(() =>
      (this.stmt("SELECT * FROM turns WHERE state = 'running' ORDER BY id").all() as TurnRow[]).map(
        toTurn,
      ),
    );
  }

  recordToolStart(input: ToolStartInput): Promise<void> {
    return this.tx(() => {
      this.checkLease(input.lease);
      this.stmt(
        `INSERT INTO tool_calls (tool_call_id, turn_id, session_id, name, arguments, state, started_at)
           VALUES (?, ?, ?, ?, ?, 'started', ?)
           ON CONFLICT (turn_id, tool_call_id) DO UPDATE SET state = 'started', started_at = excluded.started_at`,
      ).run(
        input.toolCallId,
        input.turnId,
        input.sessionId,
        input.name,
        input.arguments,
        this.now(),
      );
    });
  }

  recordToolFinish(input: ToolFinishInput): Promise<void> {
    return this.tx(() => {
      this.checkLease(input.lease);
      const now = this.now();
      const sent = input.sentFile;
      if (sent) {
        const { file } = sent;
        this.stmt(
          `INSERT INTO sent_files (id, session_key, path, name, mime, size, created_at)
             VALUES (?, ?, ?, ?, ?, ?, ?)`,
        ).run(file.id, sent.sessionKey, file.path, file.name, file.mime, file.size, now);
        const row = this.insertOutbox(
          sent.sessionKey,
          input.sessionId,
          input.turnId,
          sent.address,
          sent.caption,
          "reply",
        );
        this.stmt("UPDATE outbox SET file_id = ? WHERE id = ?").run(file.id, row.id);
      }
      this.stmt(
        `UPDATE tool_calls SET state = 'finished', result = ?, finished_at = ?
           WHERE turn_id = ? AND tool_call_id = ? AND state = 'started'`,
      ).run(input.result, now, input.turnId, input.toolCallId);
      this.appendSync(input.sessionId, input.turnId, [
        { role: "tool", tool_call_id: input.toolCallId, content: input.result },
      ]);
    });
  }

  listMediaSteps(inboxId: number): Promise<Record<string, unknown>> {
    return this.read(() => {
      const rows = this.stmt("SELECT step, result FROM media_steps WHERE inbox_id = ?").all(
        inboxId,
      ) as { step: string; result: string }[];
      return Object.fromEntries(rows.map((r) => [r.step, JSON.parse(r.result) as unknown]));
    });
  }

  recordMediaStep(input: MediaStepInput): Promise<boolean> {
    return this.tx(() => {
      const { changes } = this.stmt(
        `INSERT INTO media_steps (inbox_id, step, result, created_at) VALUES (?, ?, ?, ?)
           ON CONFLICT (inbox_id, step) DO NOTHING`,
      ).run(input.inboxId, input.step, JSON.stringify(input.result), this.now());
      if (changes === 0) return false;
      if (input.notice === undefined) return true;
      const row = this.stmt("SELECT * FROM inbox WHERE id = ?").get(input.inboxId) as
        | InboxRow
        | undefined;
      if (!row) throw new Error(`unknown inbox item ${input.inboxId}`);
      const address = JSON.parse(row.address) as ChatAddress;
      this.insertOutbox(row.session_key, row.session_id, null, address, input.notice, "notice");
      return true;
    });
  }

  enqueueNoticeOnce(input: OnceNoticeInput): Promise<OutboxItem | null> {
    return this.tx(() => {
      const { changes } = this.stmt(
        `INSERT INTO session_notices (session_id, notice, created_at) VALUES (?, ?, ?)
           ON CONFLICT (session_id, notice) DO NOTHING`,
      ).run(input.sessionId, input.name, this.now());
      if (changes === 0) return null;
      return this.insertOutbox(
        input.sessionKey,
        input.sessionId,
        null,
        input.address,
        input.text,
        "notice",
      );
    });
  }

  getSentFile(id: string): Promise<SentFile | null> {
    return this.read(() => {
      const r = this.stmt("SELECT * FROM sent_files WHERE id = ?").get(id) as
        | {
            id: string;
            session_key: string;
            path: string;
            name: string;
            mime: string;
            size: number;
            created_at: number;
          }
        | undefined;
      if (!r) return null;
      const { session_key, created_at, ...file } = r;
      return { ...file, sessionKey: session_key, createdAt: created_at };
    });
  }

  private unfinishedToolCallsSync(sessionId: string) {
    return (
      this.stmt(
        "SELECT * FROM tool_calls WHERE session_id = ? AND state = 'started' ORDER BY id",
      ).all(sessionId) as ToolCallRow[]
    ).map(toToolCall);
  }

  requestApproval(input: ApprovalRequestInput): Promise<ApprovalRecord> {
    return this.tx(() => requestApprovalSync((sql) => this.stmt(sql), input, this.now()));
  }

  getApproval(id: string): Promise<ApprovalRecord | null> {
    return this.read(() => getApprovalSync((sql) => this.stmt(sql), id));
  }

  findApprovalForCall(sessionId: string, toolCallId: string): Promise<ApprovalRecord | null> {
    return this.read(() => findApprovalForCallSync((sql) => this.stmt(sql), sessionId, toolCallId));
  }

  listApprovals(filter: ApprovalFilter = {}): Promise<ApprovalRecord[]> {
    return this.read(() => listApprovalsSync((sql) => this.stmt(sql), filter));
  }

  decideApproval(
    input: ApprovalDecisionInput,
  ): Promise<{ record: ApprovalRecord; changed: boolean } | null> {
    return this.tx(() => decideApprovalSync((sql) => this.stmt(sql), input, this.now()));
  }

  hasApprovalGrants(sessionId: string, asker: string, units: readonly string[]): Promise<boolean> {
    return this.read(() => hasApprovalGrantsSync((sql) => this.stmt(sql), sessionId, asker, units));
  }

  listUnappliedDecisions(): Promise<ApprovalRecord[]> {
    return this.read(() => listUnappliedDecisionsSync((sql) => this.stmt(sql)));
  }

  enqueueOutbox(input: OutboxInput): Promise<OutboxItem> {
    return this.tx(() =>
      this.insertOutbox(
        input.sessionKey,
        input.sessionId,
        null,
        input.address,
        input.text,
        input.kind,
        input.direct ? "sending" : "pending",
        null,
        input.approvalId ?? null,
      ),
    );
  }

  enqueueRequestNotice(input: RequestNoticeInput): Promise<OutboxItem | null> {
    return this.tx(() => {
      const session = this.ensureSessionSync(input.sessionKey, input.address);
      if (session.request_notice === input.notice) return null;
      this.stmt("UPDATE sessions SET request_notice = ? WHERE key = ?").run(
        input.notice,
        input.sessionKey,
      );
      return this.insertOutbox(
        input.sessionKey,
        session.session_id,
        null,
        input.address,
        input.text,
        "notice",
      );
    });
  }

  listPendingOutbox(platform?: string): Promise<OutboxItem[]> {
    // Through the partial index of pending rows, named: left to itself SQLite scans the whole
    // table in id order to spare a sort, and every reply ever sent stays in that table.
    const select = `SELECT o.*, f.path AS file_path, f.name AS file_name, f.mime AS file_mime,
         f.size AS file_size
       FROM outbox o INDEXED BY outbox_pending LEFT JOIN sent_files f ON f.id = o.file_id
       WHERE o.state = 'pending'`;
    return this.read(() => {
      const rows = platform
        ? this.stmt(`${select} AND o.platform = ? ORDER BY o.id`).all(platform)
        : this.stmt(`${select} ORDER BY o.id`).all();
      return (rows as OutboxRow[]).map(toOutbox);
    });
  }

  markDelivered(outboxId: number, lease?: LeaseToken): Promise<void> {
    return this.tx(() => {
      this.checkLease(lease);
      this.stmt(
        "UPDATE outbox SET state = 'delivered', delivered_at = ?, attempts = attempts + 1 WHERE id = ?",
      ).run(this.now(), outboxId);
    });
  }

  markDeliveryFailed(outboxId: number, maxAttempts: number): Promise<void> {
    return this.tx(() => {
      this.stmt(
        `UPDATE outbox SET attempts = attempts + 1,
             state = CASE WHEN attempts + 1 >= ? THEN 'failed' ELSE state END
           WHERE id = ? AND state IN ('pending', 'sending')`,
      ).run(maxAttempts, outboxId);
    });
  }

  saveStreamMessage(input: StreamMessage): Promise<void> {
    return this.tx(() => {
      if (input.piece === 0 && input.state === "open") {
        // A new stream: finished ones older than a week are of no use any more.
        this.stmt("DELETE FROM stream_messages WHERE updated_at < ? AND state != 'open'").run(
          this.now() - STREAM_RETENTION_MS,
        );
      }
      this.stmt(
        `INSERT INTO stream_messages (turn_id, piece, platform, address, message_id, text, state,
             updated_at)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?)
           ON CONFLICT (turn_id, piece) DO UPDATE SET address = excluded.address,
             message_id = excluded.message_id, text = excluded.text, state = excluded.state,
             updated_at = excluded.updated_at`,
      ).run(
        input.turnId,
        input.piece,
        input.address.platform,
        JSON.stringify(input.address),
        input.messageId,
        input.text,
        input.state,
        this.now(),
      );
    });
  }

  getStreamTurn(turnId: number): Promise<StreamTurn> {
    return this.read(() => {
      const turn = this.stmt("SELECT state FROM turns WHERE id = ?").get(turnId) as
        | { state: TurnState }
        | undefined;
      const rows = this.stmt("SELECT * FROM stream_messages WHERE turn_id = ? ORDER BY piece").all(
        turnId,
      ) as StreamMessageRow[];
      return { turnId, turnState: turn?.state ?? null, messages: rows.map(toStreamMessage) };
    });
  }

  listLeftoverStreams(platform: string): Promise<StreamTurn[]> {
    return this.read(() => {
      const rows = this.stmt(
        `SELECT s.*, t.state AS turn_state FROM stream_messages s
           LEFT JOIN turns t ON t.id = s.turn_id
           WHERE s.platform = ? AND s.state = 'open' AND COALESCE(t.state, 'gone') != 'running'
             AND NOT EXISTS (SELECT 1 FROM outbox o
               WHERE o.turn_id = s.turn_id AND o.state IN ('pending', 'sending'))
           ORDER BY s.turn_id, s.piece`,
      ).all(platform) as (StreamMessageRow & { turn_state: TurnState | null })[];
      const turns = new Map<number, StreamTurn>();
      for (const row of rows) {
        let turn = turns.get(row.turn_id);
        if (!turn) {
          turn = { turnId: row.turn_id, turnState: row.turn_state, messages: [] };
          turns.set(row.turn_id, turn);
        }
        turn.messages.push(toStreamMessage(row));
      }
      return [...turns.values()];
    });
  }

  markResumePending(keys: string[], reason: ResumeReason): Promise<void> {
    return this.tx(() => {
      const now = this.now();
      const update = this.stmt(
        `UPDATE sessions SET
           resume_reason = CASE WHEN resume_pending = 1 THEN resume_reason ELSE ? END,
           resume_marked_at = CASE WHEN resume_pending = 1 THEN resume_marked_at ELSE ? END,
           interrupt_count = CASE WHEN resume_pending = 1 THEN interrupt_count ELSE interrupt_count + 1 END,
           resume_pending = 1
         WHERE key = ? AND suspended = 0`,
      );
      for (const key of keys) update.run(reason, now, key);
    });
  }

  clearResumePending(key: string): Promise<void> {
    return this.tx(() => {
      this.stmt(
        "UPDATE sessions SET resume_pending = 0, resume_reason = NULL, resume_marked_at = NULL WHERE key = ?",
      ).run(key);
    });
  }

  countSessions(): Promise<{ total: number; resumePending: number }> {
    return this.read(() => {
      const row = this.stmt(
        "SELECT COUNT(*) AS total, COALESCE(SUM(resume_pending), 0) AS pending FROM sessions",
      ).get() as { total: number; pending: number };
      return { total: row.total, resumePending: row.pending };
    });
  }

  listSessionsActiveSince(sinceMs: number): Promise<SessionRecord[]> {
    return this.read(() =>
      (
        this.stmt(
          "SELECT * FROM sessions WHERE updated_at >= ? AND resume_pending = 0 ORDER BY updated_at",
        ).all(sinceMs) as SessionRow[]
      ).map(toSession),
    );
  }

  listResumePending(): Promise<SessionRecord[]> {
    return this.read(() =>
      (
        this.stmt(
          "SELECT * FROM sessions WHERE resume_pending = 1 ORDER BY updated_at",
        ).all() as SessionRow[]
      ).map(toSession),
    );
  }

  setSuspended(key: string, suspended: boolean): Promise<void> {
    return this.tx(() => {
      this.stmt("UPDATE sessions SET suspended = ? WHERE key = ?").run(suspended ? 1 : 0, key);
    });
  }

  requestPairing(input: PairingRequestInput): Promise<PairingRequest | null> {
    return this.tx(() => {
      const now = this.now();
      const live = this.stmt(
        "SELECT * FROM pairing WHERE platform = ? AND approved_at IS NULL AND expires_at > ? ORDER BY created_at",
      ).all(input.platform, now) as PairingRow[];
      const mine = live.find((r) => r.user_id === input.userId);
      if (mine) return toPairing(mine);
      if (live.length >= input.maxPending) return null;
      const code = newPairingCode();
      this.stmt(
        `INSERT INTO pairing (code, platform, user_id, user_name, chat_id, created_at, expires_at)
           VALUES (?, ?, ?, ?, ?, ?, ?)`,
      ).run(
        code,
        input.platform,
        input.userId,
        input.userName,
        input.chatId,
        now,
        now + input.ttlMs,
      );
      return toPairing(this.stmt("SELECT * FROM pairing WHERE code = ?").get(code) as PairingRow);
    });
  }

  listPairingRequests(platform?: string): Promise<PairingRequest[]> {
    return this.read(() =>
      (
        this.stmt(
          `SELECT * FROM pairing WHERE approved_at IS NULL AND expires_at > ? AND (? IS NULL OR platform = ?)
             ORDER BY created_at`,
        ).all(this.now(), platform ?? null, platform ?? null) as PairingRow[]
      ).map(toPairing),
    );
  }

  approvePairing(code: string, notice?: string): Promise<PairingRequest | null> {
    return this.tx(() => {
      const now = this.now();
      const row = this.stmt(
        "SELECT * FROM pairing WHERE code = ? AND approved_at IS NULL AND expires_at > ?",
      ).get(code.trim().toUpperCase(), now) as PairingRow | undefined;
      if (!row) return null;
      this.stmt("UPDATE pairing SET approved_at = ? WHERE code = ?").run(now, row.code);
      if (notice) {
        const address: ChatAddress = { platform: row.platform, chatId: row.chat_id };
        const key = noticeSessionKey(address);
        const session = this.ensureSessionSync(key, address);
        this.insertOutbox(key, session.session_id, null, address, notice, "notice");
      }
      return toPairing({ ...row, approved_at: now });
    });
  }

  listApprovedUsers(platform?: string): Promise<PairingRequest[]> {
    return this.read(() =>
      (
        this.stmt(
          `SELECT * FROM pairing p WHERE approved_at IS NOT NULL AND (? IS NULL OR platform = ?)
             AND approved_at = (SELECT MAX(approved_at) FROM pairing q
                                 WHERE q.platform = p.platform AND q.user_id = p.user_id)
             ORDER BY approved_at`,
        ).all(platform ?? null, platform ?? null) as PairingRow[]
      ).map(toPairing),
    );
  }

  revokeUser(platform: string, userId: string): Promise<number> {
    return this.tx(
      () =>
        this.stmt(
          "DELETE FROM pairing WHERE platform = ? AND user_id = ? AND approved_at IS NOT NULL",
        ).run(platform, userId).changes,
    );
  }

  isUserApproved(platform: string, userId: string): Promise<boolean> {
    return this.read(
      () =>
        this.stmt(
          "SELECT 1 FROM pairing WHERE platform = ? AND user_id = ? AND approved_at IS NOT NULL LIMIT 1",
        ).get(platform, userId) !== undefined,
    );
  }

  appendChannelEvent(channel: string, payload: unknown): Promise<number> {
    return this.tx(() =>
      Number(
        this.stmt("INSERT INTO channel_events (channel, payload, created_at) VALUES (?, ?, ?)").run(
          channel,
          JSON.stringify(payload),
          this.now(),
        ).lastInsertRowid,
      ),
    );
  }

  listChannelEvents(channel: string, afterSeq: number, limit = 1000) {
    return this.read(() =>
      (
        this.stmt(
          "SELECT seq, payload FROM channel_events WHERE channel = ? AND seq > ? ORDER BY seq LIMIT ?",
        ).all(channel, afterSeq, limit) as { seq: number; payload: string }[]
      ).map((r) => ({ seq: r.seq, payload: JSON.parse(r.payload) as unknown })),
    );
  }

  private scheduleRow(name: string): ScheduleJobRow | undefined {
    return this.stmt("SELECT * FROM schedule_jobs WHERE name = ?").get(name) as
      | ScheduleJobRow
      | undefined;
  }

  createScheduleJob(input: ScheduleJobInput): Promise<ScheduleJob> {
    return this.tx(() => {
      if (this.scheduleRow(input.name)) throw new ScheduleNameTakenError(input.name);
      const now = this.now();
      this.stmt(
        `INSERT INTO schedule_jobs (name, kind, expr, tz, prompt, session_key, chat, misfire,
             next_fire_at, created_by, created_at, updated_at)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      ).run(
        input.name,
        input.kind,
        input.expr,
        input.tz,
        input.prompt,
        input.sessionKey,
        input.chat ? JSON.stringify(input.chat) : null,
        input.misfire,
        input.nextFireAt,
        input.createdBy,
        now,
        now,
      );
      // A name used before (a deleted job, a one-shot that ran) left its session behind: the new
      // job, perhaps another chat's, starts a fresh transcript instead of inheriting that one.
      if (this.sessionRow(input.sessionKey)) this.resetSessionSync(input.sessionKey);
      return toScheduleJob(this.scheduleRow(input.name)!);
    });
  }

  listScheduleJobs(): Promise<ScheduleJob[]> {
    return this.read(() =>
      (this.stmt("SELECT * FROM schedule_jobs ORDER BY name").all() as ScheduleJobRow[]).map(
        toScheduleJob,
      ),
    );
  }

  getScheduleJob(name: string): Promise<ScheduleJob | null> {
    return this.read(() => {
      const row = this.scheduleRow(name);
      return row ? toScheduleJob(row) : null;
    });
  }

  deleteScheduleJob(name: string): Promise<boolean> {
    return this.tx(
      () => this.stmt("DELETE FROM schedule_jobs WHERE name = ?").run(name).changes === 1,
    );
  }

  pauseScheduleJob(name: string, reason: string): Promise<ScheduleJob | null> {
    return this.tx(() => {
      this.stmt(
        "UPDATE schedule_jobs SET paused = 1, paused_reason = ?, updated_at = ? WHERE name = ?",
      ).run(reason, this.now(), name);
      const row = this.scheduleRow(name);
      return row ? toScheduleJob(row) : null;
    });
  }

  resumeScheduleJob(name: string, nextFireAt: number | null): Promise<ScheduleJob | null> {
    return this.tx(() => {
      this.stmt(
        `UPDATE schedule_jobs SET paused = 0, paused_reason = NULL, failures = 0, next_fire_at = ?,
             updated_at = ? WHERE name = ?`,
      ).run(nextFireAt, this.now(), name);
      const row = this.scheduleRow(name);
      return row ? toScheduleJob(row) : null;
    });
  }

  recordScheduleRun(
    name: string,
    ok: boolean,
    pauseAfter: number,
  ): Promise<{ job: ScheduleJob; pausedNow: boolean } | null> {
    return this.tx(() => {
      const row = this.scheduleRow(name);
      if (!row) return null;
      const failures = ok ? 0 : row.failures + 1;
      const pausedNow = !ok && row.paused === 0 && failures >= pauseAfter;
      this.stmt(
        `UPDATE schedule_jobs SET failures = ?, paused = ?, paused_reason = ?, updated_at = ?
           WHERE id = ?`,
      ).run(
        failures,
        pausedNow ? 1 : row.paused,
        pausedNow ? `${failures} failed runs in a row` : row.paused_reason,
        this.now(),
        row.id,
      );
      return { job: toScheduleJob(this.scheduleRow(name)!), pausedNow };
    });
  }

  /** Throws (undoing this method's savepoint) when a fenced write's lease moved on. */
  private checkLease(lease: LeaseToken | undefined): void {
    if (!lease) return;
    const held = this.stmt(
      "SELECT 1 FROM session_leases WHERE session_key = ? AND owner = ? AND fence = ?",
    ).get(lease.sessionKey, lease.owner, lease.fence);
    if (!held) throw new LeaseLostError(lease.sessionKey);
  }

  registerInstance(instance: InstanceInput): Promise<InstanceRecord> {
    return this.tx(() => {
      this.stmt(
        `INSERT INTO instances (id, host, pid, started_at, heartbeat_at) VALUES (?, ?, ?, ?, ?)
           ON CONFLICT (id) DO UPDATE SET host = excluded.host, pid = excluded.pid,
             started_at = excluded.started_at, heartbeat_at = excluded.heartbeat_at`,
      ).run(instance.id, instance.host, instance.pid, instance.startedAt, this.now());
      return toInstance(
        this.stmt("SELECT * FROM instances WHERE id = ?").get(instance.id) as InstanceRow,
      );
    });
  }

  heartbeatInstance(id: string): Promise<boolean> {
    return this.tx(
      () =>
        this.stmt("UPDATE instances SET heartbeat_at = ? WHERE id = ?").run(this.now(), id)
          .changes === 1,
    );
  }

  removeInstance(id: string): Promise<void> {
    return this.tx(() => {
      this.stmt("DELETE FROM instances WHERE id = ?").run(id);
      this.stmt("UPDATE session_leases SET expires_at = 0 WHERE owner = ?").run(id);
    });
  }

  listLiveInstances(staleMs: number): Promise<string[]> {
    return this.read(() =>
      (
        this.stmt("SELECT id FROM instances WHERE heartbeat_at > ? ORDER BY id").all(
          this.now() - staleMs,
        ) as { id: string }[]
      ).map((r) => r.id),
    );
  }

  listInstances(): Promise<InstanceRecord[]> {
    return this.read(() =>
      (
        this.stmt(
          "SELECT *, ? - heartbeat_at AS heartbeat_age_ms FROM instances ORDER BY started_at, id",
        ).all(this.now()) as InstanceRow[]
      ).map(toInstance),
    );
  }

  removeDeadInstances(silentForMs: number): Promise<InstanceRecord[]> {
    return this.tx(() => {
      const now = this.now();
      const removed = this.stmt(
        `DELETE FROM instances WHERE heartbeat_at <= ? AND NOT EXISTS (
           SELECT 1 FROM session_leases l JOIN turns t ON t.session_key = l.session_key
             WHERE l.owner = instances.id AND t.state = 'running')
           RETURNING *, ? - heartbeat_at AS heartbeat_age_ms`,
      ).all(now - silentForMs, now) as InstanceRow[];
      return removed.map(toInstance);
    });
  }

  claimSessionLease(
    sessionKey: string,
    owner: string,
    ttlMs: number,
  ): Promise<SessionLease | null> {
    return this.tx(() => {
      const now = this.now();
      // The row stays for good (a release only expires it): the fence never goes back.
      const row = this.stmt(
        `INSERT INTO session_leases (session_key, owner, fence, expires_at) VALUES (?, ?, 1, ?)
           ON CONFLICT (session_key) DO UPDATE SET
             fence = CASE WHEN owner = excluded.owner THEN fence ELSE fence + 1 END,
             owner = excluded.owner, expires_at = excluded.expires_at
           WHERE owner = excluded.owner OR expires_at <= ?
           RETURNING *`,
      ).get(sessionKey, owner, now + ttlMs, now) as SessionLeaseRow | undefined;
      return row ? toSessionLease(row) : null;
    });
  }

  renewSessionLease(lease: LeaseToken, ttlMs: number): Promise<SessionLease | null> {
    return this.tx(() => {
      const row = this.stmt(
        `UPDATE session_leases SET expires_at = ?
           WHERE session_key = ? AND owner = ? AND fence = ? AND expires_at > 0 RETURNING *`,
      ).get(this.now() + ttlMs, lease.sessionKey, lease.owner, lease.fence) as
        | SessionLeaseRow
        | undefined;
      return row ? toSessionLease(row) : null;
    });
  }

  releaseSessionLease(lease: LeaseToken): Promise<void> {
    return this.tx(() => {
      this.stmt(
        "UPDATE session_leases SET expires_at = 0 WHERE session_key = ? AND owner = ? AND fence = ?",
      ).run(lease.sessionKey, lease.owner, lease.fence);
    });
  }

  listSessionLeases(): Promise<SessionLease[]> {
    return this.read(() =>
      (
        this.stmt("SELECT * FROM session_leases ORDER BY session_key").all() as SessionLeaseRow[]
      ).map(toSessionLease),
    );
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
