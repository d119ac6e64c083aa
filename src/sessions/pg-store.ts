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
 */
import pg from "pg";
import type { ChatMessage } from "../agent/types.js";
import { describeStoreTarget } from "../config/store-target.js";
import { errorMessage } from "../lib/errors.js";
import type { ChatAddress, InboundMessage } from "../platforms/platform.js";
import { PG_MIGRATIONS } from "./pg-migrations.js";
import {
  INTERNAL_KEY_PREFIX,
  newPairingCode,
  newSessionId,
  noticeSessionKey,
} from "./session-id.js";
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
  StoredMessage,
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
  APPROVAL_STATE_OF,
  type ApprovalRow,
  type CompactionRow,
  flag,
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
  toApproval,
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
  /** The gateway using this store (several share it): inbox rows it accepts carry this id. */
  instanceId?: string;
}

/** One connection, inside or outside a transaction. */
type Db = pg.ClientBase;

const INT8_OID = 20;

/** How long finished stream messages are kept (as in SqliteStore). */
const STREAM_RETENTION_MS = 7 * 24 * 3600 * 1000;

/**
 * The database's clock in epoch ms. Leases and heartbeats are compared across instances, so they
 * use this one clock, never an instance's (clock_timestamp: the time now, not the transaction's
 * start).
 */
const DB_NOW = "(extract(epoch FROM clock_timestamp()) * 1000)::bigint";

/**
 * BIGINT (times in epoch ms, identity ids, COUNT) arrives as a JS number, like SQLite's
 * integers: every value Keel stores fits in 2^53. Set on this pool only, not globally.
 */
const types: pg.CustomTypesConfig = {
  getTypeParser: ((oid: number, format?: "text" | "binary") =>
    oid === INT8_OID
      ? (value: string) => Number(value)
      : pg.types.getTypeParser(oid, format)) as pg.CustomTypesConfig["getTypeParser"],
};

async function all<T>(db: Db, sql: string, params: unknown[] = []): Promise<T[]> {
  return (await db.query(sql, params)).rows as T[];
}

async function first<T>(db: Db, sql: string, params: unknown[] = []): Promise<T | undefined> {
  return (await db.query(sql, params)).rows[0] as T | undefined;
}

async function changes(db: Db, sql: string, params: unknown[] = []): Promise<number> {
  return (await db.query(sql, params)).rowCount ?? 0;
}

export class PgStore implements Store {
  private readonly pool: pg.Pool;
  private readonly now: () => number;
  private readonly instanceId: string | null;
  /** Settles once the schema is current; every method waits for it (and fails with it). */
  private readonly ready: Promise<void>;

  /** Opens the store and waits for its migrations: connection and schema errors surface here. */
  static async open(url: string, options: PgStoreOptions = {}): Promise<PgStore> {
    const store = new PgStore(url, options);
    try {
      await store.ready;
    } catch (err) {
      await store.pool.end().catch(() => {});
      throw err;
    }
    return store;
  }

  constructor(url: string, options: PgStoreOptions = {}) {
    this.now = options.now ?? Date.now;
    this.instanceId = options.instanceId ?? null;
    this.pool = new pg.Pool({
      connectionString: url,
      types,
      max: options.maxConnections ?? 10,
      application_name: "keel",
      idle_in_transaction_session_timeout: options.idleInTransactionMs ?? 5000,
      connectionTimeoutMillis: options.connectTimeoutMs ?? 10_000,
      ...(options.schema && { options: `-c search_path=${quoteIdent(options.schema)}` }),
    });
    // An idle connection the server drops must not crash the process; the next query reconnects.
    this.pool.on("error", () => {});
    const where = describeStoreTarget({ kind: "postgres", url });
    this.ready = this.migrate().catch((err: unknown) => {
      throw new Error(`the store (${where}) cannot be opened: ${errorMessage(err)}`, {
        cause: err,
      });
    });
    this.ready.catch(() => {});
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
    const client = await this.pool.connect();
    let broken: Error | undefined;
    // A connection lost while checked out (the server restarted or became unreachable) emits
    // `error` on the client, and the pool listens only to idle ones: unheard, it would crash
    // the process. The query in flight fails with it anyway; the client is dropped on release.
    const onLost = (err: Error) => {
      broken = err;
    };
    client.on("error", onLost);
    try {
      await client.query(begin);
      const value = await fn(client);
      await client.query("COMMIT");
      return value;
    } catch (err) {
      await client.query("ROLLBACK").catch((rollbackError: Error) => {
        // The connection is unusable: the pool drops it instead of handing it out again.
        broken = rollbackError;
      });
      throw err;
    } finally {
      client.removeListener("error", onLost);
      client.release(broken);
    }
  }

  /** A write: one transaction, after the migrations. */
  private async tx<T>(fn: (db: Db) => Promise<T>): Promise<T> {
    await this.ready;
    return this.transaction(fn);
  }

  /** A read: one snapshot, so a read of several statements sees one committed state. */
  private async read<T>(fn: (db: Db) => Promise<T>): Promise<T> {
    await this.ready;
    return this.transaction(fn, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
  }

  private sessionRow(db: Db, key: string): Promise<SessionRow | undefined> {
    return first<SessionRow>(db, "SELECT * FROM sessions WHERE key = $1", [key]);
  }

  /** Creates the session row unless it exists; a concurrent creator's row wins and is returned. */
  private async ensureSessionIn(
    db: Db,
    key: string,
    origin: ChatAddress | null,
    credential?: string,
  ): Promise<SessionRow> {
    const existing = await this.sessionRow(db, key);
    if (existing) return existing;
    const now = this.now();
    const sessionId = newSessionId(now);
    const platform = origin?.platform ?? null;
    const created = await first<SessionRow>(
      db,
      `INSERT INTO sessions (key, session_id, platform, origin, credential, created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, $6, $6) ON CONFLICT (key) DO NOTHING RETURNING *`,
      [key, sessionId, platform, origin ? JSON.stringify(origin) : null, credential ?? null, now],
    );
    if (!created) return (await this.sessionRow(db, key))!;
    await db.query(
      "INSERT INTO transcripts (session_id, session_key, platform, created_at) VALUES ($1, $2, $3, $4)",
      [sessionId, key, platform, now],
    );
    return created;
  }

  acceptInbound(message: InboundMessage, advance?: ScheduleAdvance): Promise<AcceptInboundResult> {
    return this.tx(async (db) => {
      if (advance && !(await this.moveScheduleCursor(db, advance))) {
        throw new ScheduleChangedError(advance.jobId);
      }
      const now = this.now();
      const claim = message.idempotency;
      if (claim) {
        // The key is not stored yet, so no row to lock: requests with the same key queue here,
        // and the second one finds the first's key.
        await db.query("SELECT pg_advisory_xact_lock(hashtext($1))", [
          `keel:idempotency:${claim.scope}:${claim.key}`,
        ]);
        await db.query("DELETE FROM idempotency_keys WHERE expires_at <= $1", [now]);
        const seen = await this.idempotencyRow(db, claim.scope, claim.key, now);
        // Checked before anything is written: a repeat must not even create its session.
        if (seen) {
          return {
            accepted: false,
            item: toInbox(seen),
            ...(seen.request_hash !== claim.requestHash && { idempotencyConflict: true }),
          };
        }
      }
      const session = await this.ensureSessionIn(
        db,
        message.sessionKey,
        message.address,
        message.credential,
      );
      const inserted = await first<InboxRow>(
        db,
        `INSERT INTO inbox (platform, chat_id, platform_message_id, session_key, session_id, text,
             sender_id, sender_name, address, operator, state, received_at, attachments,
             accepted_by, client_tools, thread)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, 'pending', $11, $12, $13, $14, $15)
           ON CONFLICT (platform, chat_id, platform_message_id) DO NOTHING
           RETURNING *`,
        [
          message.platform,
          message.chatId,
          message.platformMessageId,
          message.sessionKey,
          session.session_id,
          message.text,
          message.senderId ?? null,
          message.senderName ?? null,
          JSON.stringify(message.address),
          message.operator === true,
          now,
          message.attachments?.length ? JSON.stringify(message.attachments) : null,
          this.instanceId,
          message.clientTools ? JSON.stringify(message.clientTools) : null,
          message.thread ?? null,
        ],
      );
      if (!inserted) {
        const row = await first<InboxRow>(
          db,
          "SELECT * FROM inbox WHERE platform = $1 AND chat_id = $2 AND platform_message_id = $3",
          [message.platform, message.chatId, message.platformMessageId],
        );
        return { accepted: false, item: toInbox(row!) };
      }
      await db.query("UPDATE sessions SET updated_at = $1 WHERE key = $2", [
        now,
        message.sessionKey,
      ]);
      if (message.history?.length && !(await this.hasMessages(db, session.session_id))) {
        await this.appendIn(db, session.session_id, null, message.history);
      }
      if (claim) {
        await db.query(
          `INSERT INTO idempotency_keys
               (scope, idempotency_key, request_hash, inbox_id, created_at, expires_at)
             VALUES ($1, $2, $3, $4, $5, $6)`,
          [claim.scope, claim.key, claim.requestHash, inserted.id, now, now + claim.ttlMs],
        );
      }
      return { accepted: true, item: toInbox(inserted) };
    });
  }

  private idempotencyRow(
    db: Db,
    scope: string,
    key: string,
    now: number,
  ): Promise<(InboxRow & { request_hash: string; expires_at: number }) | undefined> {
    return first(
      db,
      `SELECT i.*, k.request_hash, k.expires_at FROM idempotency_keys k
         JOIN inbox i ON i.id = k.inbox_id
         WHERE k.scope = $1 AND k.idempotency_key = $2 AND k.expires_at > $3`,
      [scope, key, now],
    );
  }

  findIdempotencyKey(scope: string, key: string): Promise<IdempotencyRecord | null> {
    return this.read(async (db) => {
      const row = await this.idempotencyRow(db, scope, key, this.now());
      return row
        ? { requestHash: row.request_hash, item: toInbox(row), expiresAt: row.expires_at }
        : null;
    });
  }

  findThread(thread: string): Promise<{ sessionKey: string; sessionId: string } | null> {
    return this.read(async (db) => {
      const row = await first<{ session_key: string; session_id: string }>(
        db,
        "SELECT session_key, session_id FROM inbox WHERE thread = $1 ORDER BY id DESC LIMIT 1",
        [thread],
      );
      return row ? { sessionKey: row.session_key, sessionId: row.session_id } : null;
    });
  }

  findInboxAnswer(inboxId: number): Promise<InboxAnswer> {
    return this.read(async (db): Promise<InboxAnswer> => {
      const item = await first<InboxRow>(db, "SELECT * FROM inbox WHERE id = $1", [inboxId]);
      if (!item) return { state: "unrecorded" };
      const open: InboxAnswer = { state: "open", sessionKey: item.session_key };
      if (item.state === "pending" || item.state === "running") return open;
      let turn = await first<TurnRow>(
        db,
        "SELECT * FROM turns WHERE inbox_id = $1 ORDER BY id LIMIT 1",
        [inboxId],
      );
      if (!turn) {
        const notice = await first<{ text: string }>(
          db,
          "SELECT text FROM outbox WHERE inbox_id = $1 ORDER BY id LIMIT 1",
          [inboxId],
        );
        return notice
          ? { state: "answered", outcome: "notice", text: notice.text }
          : { state: "unrecorded" };
      }
      // Bounded by the number of turns in the transcript; each step moves to a later turn.
      for (;;) {
        if (turn.state === "running") return open;
        if (turn.state === "done" || turn.state === "failed") {
          const reply = await first<{ text: string }>(
            db,
            "SELECT text FROM outbox WHERE turn_id = $1 AND kind = 'reply' ORDER BY id LIMIT 1",
            [turn.id],
          );
          const outcome = turn.state === "done" ? "reply" : "failed";
          return { state: "answered", outcome, text: reply?.text ?? "" };
        }
        // Cut off: a following turn of the same transcript without a new message continues it.
        const next: TurnRow | undefined = await first<TurnRow>(
          db,
          "SELECT * FROM turns WHERE session_id = $1 AND id > $2 ORDER BY id LIMIT 1",
          [turn.session_id, turn.id],
        );
        if (next && next.inbox_id === null) {
          turn = next;
          continue;
        }
        const session = await this.sessionRow(db, turn.session_key);
        const awaitingResume =
          !next && session?.session_id === turn.session_id && flag(session.resume_pending);
        return awaitingResume ? open : { state: "answered", outcome: "interrupted", text: "" };
      }
    });
  }

  /** Compare-and-set of a job's cursor (null deletes the job); false when it no longer matches. */
  private async moveScheduleCursor(
    db: Db,
    advance: Pick<ScheduleAdvance, "jobId" | "expectedNextFireAt" | "nextFireAt"> &
      Partial<Pick<ScheduleAdvance, "firedSlot" | "lateMs">>,
  ): Promise<boolean> {
    const match = [advance.jobId, advance.expectedNextFireAt];
    const moved =
      advance.nextFireAt === null
        ? await changes(
            db,
            "DELETE FROM schedule_jobs WHERE id = $1 AND next_fire_at = $2 AND NOT paused",
            match,
          )
        : await changes(
            db,
            `UPDATE schedule_jobs SET next_fire_at = $3,
                 last_fire_at = COALESCE($4, last_fire_at),
                 last_fired_late_ms = COALESCE($5, last_fired_late_ms), updated_at = $6
               WHERE id = $1 AND next_fire_at = $2 AND NOT paused`,
            [
              ...match,
              advance.nextFireAt,
              advance.firedSlot ?? null,
              advance.lateMs ?? null,
              this.now(),
            ],
          );
    return moved === 1;
  }

  skipScheduleSlots(
    jobId: number,
    expectedNextFireAt: number,
    nextFireAt: number | null,
  ): Promise<boolean> {
    return this.tx((db) => this.moveScheduleCursor(db, { jobId, expectedNextFireAt, nextFireAt }));
  }

  hasOpenInbox(platform: string, chatId: string): Promise<boolean> {
    return this.read(
      async (db) =>
        (await first(
          db,
          `SELECT 1 FROM inbox WHERE platform = $1 AND chat_id = $2
             AND state IN ('pending', 'running') LIMIT 1`,
          [platform, chatId],
        )) !== undefined,
    );
  }

  listOpenInbox(): Promise<InboxItem[]> {
    return this.read(async (db) =>
      (
        await all<InboxRow>(
          db,
          "SELECT * FROM inbox WHERE state IN ('pending', 'running') ORDER BY id",
        )
      ).map(toInbox),
    );
  }

  adoptPendingInbox(
    owner: string,
    staleMs: number,
    options: { includeOwn?: boolean } = {},
  ): Promise<InboxItem[]> {
    return this.tx(async (db) => {
      // Two gateways adopting at once: the row lock makes the second re-check the row, which
      // the first has made its own (a live instance's), so it is left alone.
      const rows = await all<InboxRow>(
        db,
        `UPDATE inbox SET accepted_by = $1
           WHERE state = 'pending' AND (
             ($3 AND (accepted_by IS NULL OR accepted_by = $1))
             OR (accepted_by <> $1 AND NOT EXISTS (
               SELECT 1 FROM instances i
                 WHERE i.id = inbox.accepted_by AND i.heartbeat_at > ${DB_NOW} - $2)))
           RETURNING *`,
        [owner, staleMs, options.includeOwn === true],
      );
      return rows.sort((a, b) => a.id - b.id).map(toInbox);
    });
  }

  closeInboxItem(
    inboxId: number,
    state: "done" | "cancelled",
    notice?: string,
  ): Promise<OutboxItem | null> {
    return this.tx(async (db) => {
      const row = await first<InboxRow>(
        db,
        "UPDATE inbox SET state = $1 WHERE id = $2 RETURNING *",
        [state, inboxId],
      );
      if (state === "cancelled") {
        await db.query("DELETE FROM idempotency_keys WHERE inbox_id = $1", [inboxId]);
      }
      if (notice === undefined) return null;
      if (!row) throw new Error(`unknown inbox item ${inboxId}`);
      const address = JSON.parse(row.address) as ChatAddress;
      const session = await this.ensureSessionIn(db, row.session_key, address);
      return this.insertOutbox(db, {
        sessionKey: row.session_key,
        sessionId: session.session_id,
        turnId: null,
        address,
        text: notice,
        kind: "notice",
        inboxId,
      });
    });
  }

  getSession(key: string): Promise<SessionRecord | null> {
    return this.read(async (db) => {
      const row = await this.sessionRow(db, key);
      return row ? toSession(row) : null;
    });
  }

  getSessionById(sessionId: string): Promise<SessionRecord | null> {
    return this.read(async (db) => {
      const row = await first<SessionRow>(db, "SELECT * FROM sessions WHERE session_id = $1", [
        sessionId,
      ]);
      if (row) return toSession(row);
      // A transcript left behind by /new: report it under its key with the old id.
      const t = await first<{ session_key: string }>(
        db,
        "SELECT session_key FROM transcripts WHERE session_id = $1",
        [sessionId],
      );
      if (!t) return null;
      const current = await this.sessionRow(db, t.session_key);
      return current ? { ...toSession(current), sessionId, resumePending: false } : null;
    });
  }

  ensureSession(key: string, origin: ChatAddress | null): Promise<SessionRecord> {
    return this.tx(async (db) => toSession(await this.ensureSessionIn(db, key, origin)));
  }

  resetSession(key: string): Promise<SessionRecord> {
    return this.tx((db) => this.resetSessionIn(db, key));
  }

  private async resetSessionIn(db: Db, key: string): Promise<SessionRecord> {
    await this.ensureSessionIn(db, key, null);
    const existing = (await first<SessionRow>(
      db,
      "SELECT * FROM sessions WHERE key = $1 FOR UPDATE",
      [key],
    ))!;
    const now = this.now();
    const sessionId = newSessionId(now);
    const updated = (await first<SessionRow>(
      db,
      `UPDATE sessions SET session_id = $1, resume_pending = FALSE, resume_reason = NULL,
           resume_marked_at = NULL, interrupt_count = 0, suspended = FALSE, request_notice = NULL,
           updated_at = $2 WHERE key = $3 RETURNING *`,
      [sessionId, now, key],
    ))!;
    const platform = existing.origin ? (JSON.parse(existing.origin) as ChatAddress).platform : null;
    await db.query(
      "INSERT INTO transcripts (session_id, session_key, platform, created_at) VALUES ($1, $2, $3, $4)",
      [sessionId, key, platform, now],
    );
    return toSession(updated);
  }

  listSessions(
    options: { limit?: number; platform?: string; internal?: boolean } = {},
  ): Promise<SessionSummary[]> {
    return this.read(async (db) => {
      const rows = await all<SessionSummaryRow>(
        db,
        `SELECT s.key, s.session_id, s.platform, s.resume_pending, s.suspended, s.updated_at,
             (SELECT COUNT(*) FROM messages m WHERE m.session_id = s.session_id) AS message_count,
             (SELECT body FROM messages m WHERE m.session_id = s.session_id
                ORDER BY seq DESC LIMIT 1) AS last_body
           FROM sessions s
           WHERE ($1::text IS NULL OR s.platform = $1) AND ($2 OR NOT starts_with(s.key, $3))
           ORDER BY s.updated_at DESC LIMIT $4`,
        [
          options.platform ?? null,
          options.internal !== false,
          INTERNAL_KEY_PREFIX,
          options.limit ?? 100,
        ],
      );
      return rows.map(toSessionSummary);
    });
  }

  loadTranscript(sessionId: string, afterSeq = 0): Promise<StoredMessage[]> {
    return this.read((db) => this.transcriptIn(db, sessionId, afterSeq));
  }

  loadTurnHistory(sessionId: string): Promise<TurnHistory> {
    return this.read(async (db) => {
      const row = await this.latestCompactionRow(db, sessionId);
      const compaction = row ? toCompaction(row) : null;
      return {
        compaction,
        messages: await this.transcriptIn(db, sessionId, compaction?.throughSeq ?? 0),
        unfinished: (
          await all<ToolCallRow>(
            db,
            "SELECT * FROM tool_calls WHERE session_id = $1 AND state = 'started' ORDER BY id",
            [sessionId],
          )
        ).map(toToolCall),
      };
    });
  }

  private async transcriptIn(db: Db, sessionId: string, afterSeq: number) {
    return (
      await all<MessageRow>(
        db,
        "SELECT seq, turn_id, body, created_at FROM messages WHERE session_id = $1 AND seq > $2 ORDER BY seq",
        [sessionId, afterSeq],
      )
    ).map(toStoredMessage);
  }

  private async hasMessages(db: Db, sessionId: string): Promise<boolean> {
    return (
      (await first(db, "SELECT 1 FROM messages WHERE session_id = $1 LIMIT 1", [sessionId])) !==
      undefined
    );
  }

  /** Appends in one statement; sequence numbers follow the array's order. */
  private async appendIn(
    db: Db,
    sessionId: string,
    turnId: number | null,
    messages: ChatMessage[],
  ): Promise<void> {
    if (messages.length === 0) return;
    await db.query(
      `INSERT INTO messages (session_id, turn_id, role, body, created_at)
         SELECT $1, $2, m.role, m.body, $3
           FROM unnest($4::text[], $5::text[]) WITH ORDINALITY AS m(role, body, n)
           ORDER BY m.n`,
      [
        sessionId,
        turnId,
        this.now(),
        messages.map((m) => m.role),
        messages.map((m) => JSON.stringify(m)),
      ],
    );
  }

  appendMessages(
    sessionId: string,
    turnId: number | null,
    messages: ChatMessage[],
    closeInboxIds: number[] = [],
    usage?: UsageInput,
    lease?: LeaseToken,
  ): Promise<void> {
    return this.tx(async (db) => {
      await this.checkLease(db, lease);
      await this.appendIn(db, sessionId, turnId, messages);
      if (usage) await this.insertUsage(db, sessionId, turnId, "turn", usage);
      if (closeInboxIds.length > 0) {
        await db.query("UPDATE inbox SET state = 'done' WHERE id = ANY($1::bigint[])", [
          closeInboxIds,
        ]);
      }
    });
  }

  startTurn(input: StartTurnInput): Promise<StartedTurn> {
    return this.tx(async (db) => {
      await this.checkLease(db, input.lease);
      const session = await this.ensureSessionIn(db, input.sessionKey, null);
      if (input.inboxId !== null) {
        const taken = await changes(
          db,
          "UPDATE inbox SET state = 'running' WHERE id = $1 AND state = 'pending'",
          [input.inboxId],
        );
        if (taken === 0) throw new InboxItemTakenError(input.inboxId);
      }
      const now = this.now();
      const turn = (await first<TurnRow>(
        db,
        `INSERT INTO turns (session_key, session_id, inbox_id, state, started_at)
           VALUES ($1, $2, $3, 'running', $4) RETURNING *`,
        [input.sessionKey, session.session_id, input.inboxId, now],
      ))!;
      const input_ = [
        ...(input.userMessage ? [input.userMessage] : []),
        ...(input.inputMessages ?? []),
      ];
      if (input_.length > 0) await this.appendIn(db, session.session_id, turn.id, input_);
      const touched = (await first<SessionRow>(
        db,
        `UPDATE sessions SET origin = COALESCE($1, origin), memory_user = COALESCE($2, memory_user),
             updated_at = $3, client_tools = CASE WHEN $5 THEN $6 ELSE client_tools END
           WHERE key = $4 RETURNING *`,
        [
          input.origin ? JSON.stringify(input.origin) : null,
          input.memoryUser || null,
          now,
          input.sessionKey,
          input.clientTools !== undefined,
          input.clientTools?.length ? JSON.stringify(input.clientTools) : null,
        ],
      ))!;
      return { ...toTurn(turn), session: toSession(touched) };
    });
  }

  finishTurn(input: FinishTurnInput): Promise<OutboxItem | null> {
    return this.tx(async (db) => {
      await this.checkLease(db, input.lease);
      const now = this.now();
      const turn = await first<TurnRow>(
        db,
        "UPDATE turns SET state = $1, finished_at = $2 WHERE id = $3 RETURNING *",
        [input.state, now, input.turnId],
      );
      if (!turn) throw new Error(`unknown turn ${input.turnId}`);
      if (turn.inbox_id !== null) {
        await db.query("UPDATE inbox SET state = 'done' WHERE id = $1", [turn.inbox_id]);
      }
      if (input.finalMessage) {
        await this.appendIn(db, turn.session_id, input.turnId, [input.finalMessage]);
      }
      if (input.usage) {
        await this.insertUsage(db, turn.session_id, input.turnId, "turn", input.usage);
      }
      if (input.state === "done") {
        // A finished turn ends the interruption streak and any pending resume.
        await db.query(
          `UPDATE sessions SET interrupt_count = 0, resume_pending = FALSE, resume_reason = NULL,
               resume_marked_at = NULL, request_notice = NULL, updated_at = $1
             WHERE key = $2 AND session_id = $3`,
          [now, turn.session_key, turn.session_id],
        );
      }
      if (!input.reply) return null;
      return this.insertOutbox(db, {
        sessionKey: turn.session_key,
        sessionId: turn.session_id,
        turnId: input.turnId,
        address: input.reply.address,
        text: input.reply.text,
        kind: "reply",
        state: input.reply.inBand ? "delivered" : "pending",
        approvalId: input.reply.approvalId,
      });
    });
  }

  private async insertOutbox(
    db: Db,
    row: {
      sessionKey: string;
      sessionId: string;
      turnId: number | null;
      address: ChatAddress;
      text: string;
      kind: "reply" | "notice";
      /** `delivered`: a record of a reply answered in band (FinishTurnInput.reply.inBand). */
      state?: "pending" | "sending" | "delivered";
      /** The inbox item this notice answers (it closed the item without a turn). */
      inboxId?: number;
      /** The approval this row asks for (chat platforms add buttons). */
      approvalId?: string | undefined;
    },
  ): Promise<OutboxItem> {
    const now = this.now();
    const state = row.state ?? "pending";
    const inserted = await first<OutboxRow>(
      db,
      `INSERT INTO outbox (session_key, session_id, turn_id, platform, address, text, kind, state,
           created_at, delivered_at, inbox_id, approval_id, queued_by)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) RETURNING *`,
      [
        row.sessionKey,
        row.sessionId,
        row.turnId,
        row.address.platform,
        JSON.stringify(row.address),
        row.text,
        row.kind,
        state,
        now,
        state === "delivered" ? now : null,
        row.inboxId ?? null,
        row.approvalId ?? null,
        this.instanceId,
      ],
    );
    return toOutbox(inserted!);
  }

  listRunningTurns(): Promise<TurnRecord[]> {
    return this.read(async (db) =>
      (await all<TurnRow>(db, "SELECT * FROM turns WHERE state = 'running' ORDER BY id")).map(
        toTurn,
      ),
    );
  }

  recordToolStart(input: ToolStartInput): Promise<void> {
    return this.tx(async (db) => {
      await this.checkLease(db, input.lease);
      await db.query(
        `INSERT INTO tool_calls (tool_call_id, turn_id, session_id, name, arguments, state, started_at)
           VALUES ($1, $2, $3, $4, $5, 'started', $6)
           ON CONFLICT (turn_id, tool_call_id)
             DO UPDATE SET state = 'started', started_at = EXCLUDED.started_at`,
        [input.toolCallId, input.turnId, input.sessionId, input.name, input.arguments, this.now()],
      );
    });
  }

  recordToolFinish(input: ToolFinishInput): Promise<void> {
    return this.tx(async (db) => {
      await this.checkLease(db, input.lease);
      await db.query(
        `UPDATE tool_calls SET state = 'finished', result = $1, finished_at = $2
           WHERE turn_id = $3 AND tool_call_id = $4 AND state = 'started'`,
        [input.result, this.now(), input.turnId, input.toolCallId],
      );
      await this.appendIn(db, input.sessionId, input.turnId, [
        { role: "tool", tool_call_id: input.toolCallId, content: input.result },
      ]);
      const sent = input.sentFile;
      if (sent) {
        const { file } = sent;
        await db.query(
          `INSERT INTO sent_files (id, session_key, path, name, mime, size, created_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7)`,
          [file.id, sent.sessionKey, file.path, file.name, file.mime, file.size, this.now()],
        );
        const row = await this.insertOutbox(db, {
          sessionKey: sent.sessionKey,
          sessionId: input.sessionId,
          turnId: input.turnId,
          address: sent.address,
          text: sent.caption,
          kind: "reply",
        });
        await db.query("UPDATE outbox SET file_id = $1 WHERE id = $2", [file.id, row.id]);
      }
    });
  }

  enqueueOutbox(input: OutboxInput): Promise<OutboxItem> {
    return this.tx((db) =>
      this.insertOutbox(db, {
        sessionKey: input.sessionKey,
        sessionId: input.sessionId,
        turnId: null,
        address: input.address,
        text: input.text,
        kind: input.kind,
        state: input.direct ? "sending" : "pending",
        approvalId: input.approvalId,
      }),
    );
  }

  enqueueRequestNotice(input: RequestNoticeInput): Promise<OutboxItem | null> {
    return this.tx(async (db) => {
      await this.ensureSessionIn(db, input.sessionKey, input.address);
      // Locked: two instances giving the same notice at once give it once.
      const session = (await first<SessionRow>(
        db,
        "SELECT * FROM sessions WHERE key = $1 FOR UPDATE",
        [input.sessionKey],
      ))!;
      if (session.request_notice === input.notice) return null;
      await db.query("UPDATE sessions SET request_notice = $1 WHERE key = $2", [
        input.notice,
        input.sessionKey,
      ]);
      return this.insertOutbox(db, {
        sessionKey: input.sessionKey,
        sessionId: session.session_id,
        turnId: null,
        address: input.address,
        text: input.text,
        kind: "notice",
      });
    });
  }

  listPendingOutbox(platform?: string): Promise<OutboxItem[]> {
    return this.read(async (db) =>
      (
        await all<OutboxRow>(
          db,
          `SELECT o.*, f.path AS file_path, f.name AS file_name, f.mime AS file_mime,
               f.size AS file_size
             FROM outbox o LEFT JOIN sent_files f ON f.id = o.file_id
             WHERE o.state = 'pending' AND ($1::text IS NULL OR o.platform = $1) ORDER BY o.id`,
          [platform ?? null],
        )
      ).map(toOutbox),
    );
  }

  markDelivered(outboxId: number, lease?: LeaseToken): Promise<void> {
    return this.tx(async (db) => {
      await this.checkLease(db, lease);
      await db.query(
        `UPDATE outbox SET state = 'delivered', delivered_at = $1, attempts = attempts + 1
           WHERE id = $2`,
        [this.now(), outboxId],
      );
    });
  }

  markDeliveryFailed(outboxId: number, maxAttempts: number): Promise<void> {
    return this.tx(async (db) => {
      await db.query(
        `UPDATE outbox SET attempts = attempts + 1,
             state = CASE WHEN attempts + 1 >= $1 THEN 'failed' ELSE state END
           WHERE id = $2 AND state IN ('pending', 'sending')`,
        [maxAttempts, outboxId],
      );
    });
  }

  markResumePending(keys: string[], reason: ResumeReason): Promise<void> {
    return this.tx(async (db) => {
      await db.query(
        `UPDATE sessions SET
           resume_reason = CASE WHEN resume_pending THEN resume_reason ELSE $1 END,
           resume_marked_at = CASE WHEN resume_pending THEN resume_marked_at ELSE $2 END,
           interrupt_count = CASE WHEN resume_pending THEN interrupt_count
                                  ELSE interrupt_count + 1 END,
           resume_pending = TRUE
         WHERE key = ANY($3::text[]) AND NOT suspended`,
        [reason, this.now(), keys],
      );
    });
  }

  clearResumePending(key: string): Promise<void> {
    return this.tx(async (db) => {
      await db.query(
        `UPDATE sessions SET resume_pending = FALSE, resume_reason = NULL, resume_marked_at = NULL
           WHERE key = $1`,
        [key],
      );
    });
  }

  countSessions(): Promise<{ total: number; resumePending: number }> {
    return this.read(async (db) => {
      const row = await first<{ total: number; pending: number }>(
        db,
        "SELECT COUNT(*) AS total, COUNT(*) FILTER (WHERE resume_pending) AS pending FROM sessions",
      );
      return { total: row!.total, resumePending: row!.pending };
    });
  }

  listSessionsActiveSince(sinceMs: number): Promise<SessionRecord[]> {
    return this.read(async (db) =>
      (
        await all<SessionRow>(
          db,
          `SELECT * FROM sessions WHERE updated_at >= $1 AND NOT resume_pending
             ORDER BY updated_at`,
          [sinceMs],
        )
      ).map(toSession),
    );
  }

  listResumePending(): Promise<SessionRecord[]> {
    return this.read(async (db) =>
      (
        await all<SessionRow>(db, "SELECT * FROM sessions WHERE resume_pending ORDER BY updated_at")
      ).map(toSession),
    );
  }

  setSuspended(key: string, suspended: boolean): Promise<void> {
    return this.tx(async (db) => {
      await db.query("UPDATE sessions SET suspended = $1 WHERE key = $2", [suspended, key]);
    });
  }

  requestPairing(input: PairingRequestInput): Promise<PairingRequest | null> {
    return this.tx(async (db) => {
      // The cap counts a platform's live codes: two instances must not both see room for one more.
      await db.query("SELECT pg_advisory_xact_lock(hashtext($1))", [
        `keel:pairing:${input.platform}`,
      ]);
      const now = this.now();
      const live = await all<PairingRow>(
        db,
        `SELECT * FROM pairing WHERE platform = $1 AND approved_at IS NULL AND expires_at > $2
           ORDER BY created_at`,
        [input.platform, now],
      );
      const mine = live.find((r) => r.user_id === input.userId);
      if (mine) return toPairing(mine);
      if (live.length >= input.maxPending) return null;
      const row = await first<PairingRow>(
        db,
        `INSERT INTO pairing (code, platform, user_id, user_name, chat_id, created_at, expires_at)
           VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING *`,
        [
          newPairingCode(),
          input.platform,
          input.userId,
          input.userName,
          input.chatId,
          now,
          now + input.ttlMs,
        ],
      );
      return toPairing(row!);
    });
  }

  listPairingRequests(platform?: string): Promise<PairingRequest[]> {
    return this.read(async (db) =>
      (
        await all<PairingRow>(
          db,
          `SELECT * FROM pairing WHERE approved_at IS NULL AND expires_at > $1
             AND ($2::text IS NULL OR platform = $2) ORDER BY created_at`,
          [this.now(), platform ?? null],
        )
      ).map(toPairing),
    );
  }

  approvePairing(code: string, notice?: string): Promise<PairingRequest | null> {
    return this.tx(async (db) => {
      const now = this.now();
      const row = await first<PairingRow>(
        db,
        `UPDATE pairing SET approved_at = $2
           WHERE code = $1 AND approved_at IS NULL AND expires_at > $2 RETURNING *`,
        [code.trim().toUpperCase(), now],
      );
      if (!row) return null;
      if (notice) {
        const address: ChatAddress = { platform: row.platform, chatId: row.chat_id };
        const key = noticeSessionKey(address);
        const session = await this.ensureSessionIn(db, key, address);
        await this.insertOutbox(db, {
          sessionKey: key,
          sessionId: session.session_id,
          turnId: null,
          address,
          text: notice,
          kind: "notice",
        });
      }
      return toPairing(row);
    });
  }

  listApprovedUsers(platform?: string): Promise<PairingRequest[]> {
    return this.read(async (db) =>
      (
        await all<PairingRow>(
          db,
          `SELECT * FROM pairing p WHERE approved_at IS NOT NULL
             AND ($1::text IS NULL OR platform = $1)
             AND approved_at = (SELECT MAX(approved_at) FROM pairing q
                                 WHERE q.platform = p.platform AND q.user_id = p.user_id)
             ORDER BY approved_at`,
          [platform ?? null],
        )
      ).map(toPairing),
    );
  }

  revokeUser(platform: string, userId: string): Promise<number> {
    return this.tx((db) =>
      changes(
        db,
        "DELETE FROM pairing WHERE platform = $1 AND user_id = $2 AND approved_at IS NOT NULL",
        [platform, userId],
      ),
    );
  }

  isUserApproved(platform: string, userId: string): Promise<boolean> {
    return this.read(
      async (db) =>
        (await first(
          db,
          `SELECT 1 FROM pairing WHERE platform = $1 AND user_id = $2 AND approved_at IS NOT NULL
             LIMIT 1`,
          [platform, userId],
        )) !== undefined,
    );
  }

  appendChannelEvent(channel: string, payload: unknown): Promise<number> {
    return this.tx(async (db) => {
      const row = await first<{ seq: number }>(
        db,
        "INSERT INTO channel_events (channel, payload, created_at) VALUES ($1, $2, $3) RETURNING seq",
        [channel, JSON.stringify(payload), this.now()],
      );
      return row!.seq;
    });
  }

  listChannelEvents(
    channel: string,
    afterSeq: number,
    limit = 1000,
  ): Promise<{ seq: number; payload: unknown }[]> {
    return this.read(async (db) =>
      (
        await all<{ seq: number; payload: string }>(
          db,
          `SELECT seq, payload FROM channel_events WHERE channel = $1 AND seq > $2
             ORDER BY seq LIMIT $3`,
          [channel, afterSeq, limit],
        )
      ).map((r) => ({ seq: r.seq, payload: JSON.parse(r.payload) as unknown })),
    );
  }

  private scheduleRow(db: Db, name: string): Promise<ScheduleJobRow | undefined> {
    return first<ScheduleJobRow>(db, "SELECT * FROM schedule_jobs WHERE name = $1", [name]);
  }

  createScheduleJob(input: ScheduleJobInput): Promise<ScheduleJob> {
    return this.tx(async (db) => {
      const now = this.now();
      const row = await first<ScheduleJobRow>(
        db,
        `INSERT INTO schedule_jobs (name, kind, expr, tz, prompt, session_key, chat, misfire,
             next_fire_at, created_by, created_at, updated_at)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $11)
           ON CONFLICT (name) DO NOTHING RETURNING *`,
        [
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
        ],
      );
      if (!row) throw new ScheduleNameTakenError(input.name);
      // A name used before left its session behind: the new job starts a fresh transcript.
      if (await this.sessionRow(db, input.sessionKey)) {
        await this.resetSessionIn(db, input.sessionKey);
      }
      return toScheduleJob(row);
    });
  }

  listScheduleJobs(): Promise<ScheduleJob[]> {
    return this.read(async (db) =>
      (await all<ScheduleJobRow>(db, "SELECT * FROM schedule_jobs ORDER BY name")).map(
        toScheduleJob,
      ),
    );
  }

  getScheduleJob(name: string): Promise<ScheduleJob | null> {
    return this.read(async (db) => {
      const row = await this.scheduleRow(db, name);
      return row ? toScheduleJob(row) : null;
    });
  }

  deleteScheduleJob(name: string): Promise<boolean> {
    return this.tx(
      async (db) => (await changes(db, "DELETE FROM schedule_jobs WHERE name = $1", [name])) === 1,
    );
  }

  pauseScheduleJob(name: string, reason: string): Promise<ScheduleJob | null> {
    return this.tx(async (db) => {
      const row = await first<ScheduleJobRow>(
        db,
        `UPDATE schedule_jobs SET paused = TRUE, paused_reason = $1, updated_at = $2
           WHERE name = $3 RETURNING *`,
        [reason, this.now(), name],
      );
      return row ? toScheduleJob(row) : null;
    });
  }

  resumeScheduleJob(name: string, nextFireAt: number | null): Promise<ScheduleJob | null> {
    return this.tx(async (db) => {
      const row = await first<ScheduleJobRow>(
        db,
        `UPDATE schedule_jobs SET paused = FALSE, paused_reason = NULL, failures = 0,
             next_fire_at = $1, updated_at = $2 WHERE name = $3 RETURNING *`,
        [nextFireAt, this.now(), name],
      );
      return row ? toScheduleJob(row) : null;
    });
  }

  recordScheduleRun(
    name: string,
    ok: boolean,
    pauseAfter: number,
  ): Promise<{ job: ScheduleJob; pausedNow: boolean } | null> {
    return this.tx(async (db) => {
      const row = await first<ScheduleJobRow>(
        db,
        "SELECT * FROM schedule_jobs WHERE name = $1 FOR UPDATE",
        [name],
      );
      if (!row) return null;
      const failures = ok ? 0 : row.failures + 1;
      const pausedNow = !ok && !flag(row.paused) && failures >= pauseAfter;
      const updated = await first<ScheduleJobRow>(
        db,
        `UPDATE schedule_jobs SET failures = $1, paused = $2, paused_reason = $3, updated_at = $4
           WHERE id = $5 RETURNING *`,
        [
          failures,
          pausedNow || flag(row.paused),
          pausedNow ? `${failures} failed runs in a row` : row.paused_reason,
          this.now(),
          row.id,
        ],
      );
      return { job: toScheduleJob(updated!), pausedNow };
    });
  }

  /**
   * Throws when a fenced write's lease moved on. The row stays share-locked until this
   * transaction ends, so a claim by another instance waits for this write instead of passing it.
   */
  private async checkLease(db: Db, lease: LeaseToken | undefined): Promise<void> {
    if (!lease) return;
    const held = await first(
      db,
      `SELECT 1 FROM session_leases WHERE session_key = $1 AND owner = $2 AND fence = $3
         FOR SHARE`,
      [lease.sessionKey, lease.owner, lease.fence],
    );
    if (!held) throw new LeaseLostError(lease.sessionKey);
  }

  registerInstance(instance: InstanceInput): Promise<InstanceRecord> {
    return this.tx(async (db) => {
      const row = await first<InstanceRow>(
        db,
        `INSERT INTO instances (id, host, pid, started_at, heartbeat_at)
           VALUES ($1, $2, $3, $4, ${DB_NOW})
           ON CONFLICT (id) DO UPDATE SET host = EXCLUDED.host, pid = EXCLUDED.pid,
             started_at = EXCLUDED.started_at, heartbeat_at = EXCLUDED.heartbeat_at
           RETURNING *`,
        [instance.id, instance.host, instance.pid, instance.startedAt],
      );
      return toInstance(row!);
    });
  }

  heartbeatInstance(id: string): Promise<boolean> {
    return this.tx(
      async (db) =>
        (await changes(db, `UPDATE instances SET heartbeat_at = ${DB_NOW} WHERE id = $1`, [id])) ===
        1,
    );
  }

  removeInstance(id: string): Promise<void> {
    return this.tx(async (db) => {
      await db.query("DELETE FROM instances WHERE id = $1", [id]);
      await db.query("UPDATE session_leases SET expires_at = 0 WHERE owner = $1", [id]);
    });
  }

  listLiveInstances(staleMs: number): Promise<string[]> {
    return this.read(async (db) =>
      (
        await all<{ id: string }>(
          db,
          `SELECT id FROM instances WHERE heartbeat_at > ${DB_NOW} - $1 ORDER BY id`,
          [staleMs],
        )
      ).map((r) => r.id),
    );
  }

  listInstances(): Promise<InstanceRecord[]> {
    return this.read(async (db) =>
      (
        await all<InstanceRow>(
          db,
          `SELECT *, ${DB_NOW} - heartbeat_at AS heartbeat_age_ms FROM instances
             ORDER BY started_at, id`,
        )
      ).map(toInstance),
    );
  }

  removeDeadInstances(silentForMs: number): Promise<InstanceRecord[]> {
    return this.tx(async (db) =>
      (
        await all<InstanceRow>(
          db,
          `DELETE FROM instances i WHERE i.heartbeat_at <= ${DB_NOW} - $1 AND NOT EXISTS (
             SELECT 1 FROM session_leases l JOIN turns t ON t.session_key = l.session_key
               WHERE l.owner = i.id AND t.state = 'running')
             RETURNING *, ${DB_NOW} - heartbeat_at AS heartbeat_age_ms`,
          [silentForMs],
        )
      ).map(toInstance),
    );
  }

  claimSessionLease(
    sessionKey: string,
    owner: string,
    ttlMs: number,
  ): Promise<SessionLease | null> {
    return this.tx(async (db) => {
      // The row stays for good (a release only expires it): the fence never goes back.
      const row = await first<SessionLeaseRow>(
        db,
        `INSERT INTO session_leases AS l (session_key, owner, fence, expires_at)
           VALUES ($1, $2, 1, ${DB_NOW} + $3)
           ON CONFLICT (session_key) DO UPDATE SET
             fence = CASE WHEN l.owner = EXCLUDED.owner THEN l.fence ELSE l.fence + 1 END,
             owner = EXCLUDED.owner, expires_at = EXCLUDED.expires_at
           WHERE l.owner = EXCLUDED.owner OR l.expires_at <= ${DB_NOW}
           RETURNING *`,
        [sessionKey, owner, ttlMs],
      );
      return row ? toSessionLease(row) : null;
    });
  }

  renewSessionLease(lease: LeaseToken, ttlMs: number): Promise<SessionLease | null> {
    return this.tx(async (db) => {
      const row = await first<SessionLeaseRow>(
        db,
        `UPDATE session_leases SET expires_at = ${DB_NOW} + $4
           WHERE session_key = $1 AND owner = $2 AND fence = $3 AND expires_at > 0 RETURNING *`,
        [lease.sessionKey, lease.owner, lease.fence, ttlMs],
      );
      return row ? toSessionLease(row) : null;
    });
  }

  releaseSessionLease(lease: LeaseToken): Promise<void> {
    return this.tx(async (db) => {
      await db.query(
        `UPDATE session_leases SET expires_at = 0
           WHERE session_key = $1 AND owner = $2 AND fence = $3`,
        [lease.sessionKey, lease.owner, lease.fence],
      );
    });
  }

  listSessionLeases(): Promise<SessionLease[]> {
    return this.read(async (db) =>
      (await all<SessionLeaseRow>(db, "SELECT * FROM session_leases ORDER BY session_key")).map(
        toSessionLease,
      ),
    );
  }

  getPlatformState(key: string): Promise<unknown> {
    return this.read(async (db) => {
      const row = await first<{ value: string }>(
        db,
        "SELECT value FROM platform_state WHERE key = $1",
        [key],
      );
      return row ? (JSON.parse(row.value) as unknown) : null;
    });
  }

  setPlatformState(key: string, value: unknown): Promise<void> {
    return this.tx(async (db) => {
      if (value === null) {
        await db.query("DELETE FROM platform_state WHERE key = $1", [key]);
        return;
      }
      await db.query(
        `INSERT INTO platform_state (key, value, updated_at) VALUES ($1, $2, $3)
           ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, updated_at = EXCLUDED.updated_at`,
        [key, JSON.stringify(value), this.now()],
      );
    });
  }

  listRecentChats(platform: string, sinceMs: number): Promise<RecentChat[]> {
    return this.read(async (db) => {
      const rows = await all<{ chat_id: string; platform_message_id: string; received_at: number }>(
        db,
        `SELECT i.chat_id, i.platform_message_id, i.received_at FROM inbox i
           JOIN (SELECT MAX(id) AS id FROM inbox WHERE platform = $1 AND received_at >= $2
                   GROUP BY chat_id) latest ON latest.id = i.id
           ORDER BY i.id`,
        [platform, sinceMs],
      );
      return rows.map((r) => ({
        chatId: r.chat_id,
        lastMessageId: r.platform_message_id,
        receivedAt: r.received_at,
      }));
    });
  }

  saveStreamMessage(input: StreamMessage): Promise<void> {
    return this.tx(async (db) => {
      if (input.piece === 0 && input.state === "open") {
        // A new stream: finished ones older than a week are of no use any more.
        await db.query("DELETE FROM stream_messages WHERE updated_at < $1 AND state != 'open'", [
          this.now() - STREAM_RETENTION_MS,
        ]);
      }
      await db.query(
        `INSERT INTO stream_messages (turn_id, piece, platform, address, message_id, text, state,
             updated_at)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
           ON CONFLICT (turn_id, piece) DO UPDATE SET address = EXCLUDED.address,
             message_id = EXCLUDED.message_id, text = EXCLUDED.text, state = EXCLUDED.state,
             updated_at = EXCLUDED.updated_at`,
        [
          input.turnId,
          input.piece,
          input.address.platform,
          JSON.stringify(input.address),
          input.messageId,
          input.text,
          input.state,
          this.now(),
        ],
      );
    });
  }

  getStreamTurn(turnId: number): Promise<StreamTurn> {
    return this.read(async (db) => {
      const turn = await first<{ state: TurnState }>(db, "SELECT state FROM turns WHERE id = $1", [
        turnId,
      ]);
      const rows = await all<StreamMessageRow>(
        db,
        "SELECT * FROM stream_messages WHERE turn_id = $1 ORDER BY piece",
        [turnId],
      );
      return { turnId, turnState: turn?.state ?? null, messages: rows.map(toStreamMessage) };
    });
  }

  listLeftoverStreams(platform: string): Promise<StreamTurn[]> {
    return this.read(async (db) => {
      const rows = await all<StreamMessageRow & { turn_state: TurnState | null }>(
        db,
        `SELECT s.*, t.state AS turn_state FROM stream_messages s
           LEFT JOIN turns t ON t.id = s.turn_id
           WHERE s.platform = $1 AND s.state = 'open' AND COALESCE(t.state, 'gone') != 'running'
             AND NOT EXISTS (SELECT 1 FROM outbox o
               WHERE o.turn_id = s.turn_id AND o.state IN ('pending', 'sending'))
           ORDER BY s.turn_id, s.piece`,
        [platform],
      );
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

  private async approvalRow(db: Db, id: string): Promise<ApprovalRecord | null> {
    const row = await first<ApprovalRow>(db, "SELECT * FROM approvals WHERE id = $1", [id]);
    return row ? toApproval(row) : null;
  }

  requestApproval(input: ApprovalRequestInput): Promise<ApprovalRecord> {
    return this.tx(async (db) => {
      const existing = await this.approvalRow(db, input.id);
      if (existing) return existing;
      const now = this.now();
      await db.query(
        `INSERT INTO tool_calls (tool_call_id, turn_id, session_id, name, arguments, state, started_at)
           VALUES ($1, $2, $3, $4, $5, 'awaiting_approval', $6)
           ON CONFLICT (turn_id, tool_call_id) DO UPDATE SET state = 'awaiting_approval'`,
        [input.toolCallId, input.turnId, input.sessionId, input.toolName, input.arguments, now],
      );
      const row = await first<ApprovalRow>(
        db,
        `INSERT INTO approvals (id, session_key, session_id, turn_id, tool_call_id, tool_name,
             summary, rule, reason, address, requester, asker, grants, state, created_at,
             deadline_at)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, 'pending', $14, $15)
           RETURNING *`,
        [
          input.id,
          input.sessionKey,
          input.sessionId,
          input.turnId,
          input.toolCallId,
          input.toolName,
          input.summary,
          input.rule,
          input.reason,
          input.address ? JSON.stringify(input.address) : null,
          input.requester,
          input.asker,
          JSON.stringify(input.grants),
          now,
          input.deadlineAt,
        ],
      );
      return toApproval(row!);
    });
  }

  getApproval(id: string): Promise<ApprovalRecord | null> {
    return this.read((db) => this.approvalRow(db, id));
  }

  findApprovalForCall(sessionId: string, toolCallId: string): Promise<ApprovalRecord | null> {
    return this.read(async (db) => {
      const row = await first<ApprovalRow>(
        db,
        `SELECT * FROM approvals WHERE session_id = $1 AND tool_call_id = $2
           ORDER BY created_at DESC, seq DESC LIMIT 1`,
        [sessionId, toolCallId],
      );
      return row ? toApproval(row) : null;
    });
  }

  listApprovals(filter: ApprovalFilter = {}): Promise<ApprovalRecord[]> {
    const state = filter.state ?? null;
    // As the SQLite store: the narrowed lists are not capped (sqlite-approvals.ts).
    return this.read(async (db) => {
      let rows: ApprovalRow[];
      if (filter.dueBy !== undefined) {
        rows = await all<ApprovalRow>(
          db,
          `SELECT * FROM approvals WHERE state = 'pending' AND deadline_at <= $1
             ORDER BY deadline_at, seq`,
          [filter.dueBy],
        );
      } else if (filter.sessionId !== undefined || filter.sessionKey !== undefined) {
        const column = filter.sessionId !== undefined ? "session_id" : "session_key";
        rows = await all<ApprovalRow>(
          db,
          `SELECT * FROM approvals WHERE ${column} = $1 AND ($2::text IS NULL OR state = $2)
             ORDER BY created_at DESC, seq DESC`,
          [filter.sessionId ?? filter.sessionKey, state],
        );
      } else {
        rows = await all<ApprovalRow>(
          db,
          `SELECT * FROM approvals WHERE ($1::text IS NULL OR state = $1)
             ORDER BY created_at DESC, seq DESC LIMIT 500`,
          [state],
        );
      }
      return rows.map(toApproval);
    });
  }

  decideApproval(
    input: ApprovalDecisionInput,
  ): Promise<{ record: ApprovalRecord; changed: boolean } | null> {
    return this.tx(async (db) => {
      const now = this.now();
      const state = APPROVAL_STATE_OF[input.decision];
      // Conditional on `pending`: of two answers at once (two gateways), one changes it.
      const changed = await changes(
        db,
        `UPDATE approvals SET state = $1, decision = $2, decided_by = $3, decided_at = $4
           WHERE id = $5 AND state = 'pending'`,
        [state, input.decision, input.decidedBy, now, input.id],
      );
      const record = await this.approvalRow(db, input.id);
      if (!record) return null;
      if (changed === 0) return { record, changed: false };
      await db.query(
        `UPDATE tool_calls SET state = $1, finished_at = $2
           WHERE turn_id = $3 AND tool_call_id = $4 AND state = 'awaiting_approval'`,
        [state, now, record.turnId, record.toolCallId],
      );
      if (input.decision === "approve_session" && record.asker !== null) {
        for (const unit of record.grants) {
          await db.query(
            `INSERT INTO approval_grants (session_id, asker, grant_unit, granted_by, created_at)
               VALUES ($1, $2, $3, $4, $5) ON CONFLICT (session_id, asker, grant_unit) DO NOTHING`,
            [record.sessionId, record.asker, unit, input.decidedBy, now],
          );
        }
      }
      return { record, changed: true };
    });
  }

  hasApprovalGrants(sessionId: string, asker: string, units: readonly string[]): Promise<boolean> {
    if (units.length === 0) return Promise.resolve(false);
    return this.read(async (db) => {
      const held = await all<{ grant_unit: string }>(
        db,
        `SELECT grant_unit FROM approval_grants
           WHERE session_id = $1 AND asker = $2 AND grant_unit = ANY($3)`,
        [sessionId, asker, [...units]],
      );
      const found = new Set(held.map((r) => r.grant_unit));
      return units.every((unit) => found.has(unit));
    });
  }

  listUnappliedDecisions(): Promise<ApprovalRecord[]> {
    return this.read(async (db) =>
      (
        await all<ApprovalRow>(
          db,
          `SELECT a.* FROM approvals a
             JOIN sessions s ON s.key = a.session_key AND s.session_id = a.session_id
             WHERE a.state != 'pending' AND NOT EXISTS (
               SELECT 1 FROM tool_calls t WHERE t.session_id = a.session_id
                 AND t.tool_call_id = a.tool_call_id AND t.turn_id > a.turn_id)
             ORDER BY a.decided_at, a.seq`,
        )
      ).map(toApproval),
    );
  }

  private async insertUsage(
    db: Db,
    sessionId: string,
    turnId: number | null,
    purpose: "turn" | "compaction",
    usage: UsageInput,
  ): Promise<void> {
    await db.query(
      `INSERT INTO model_usage (session_id, turn_id, model, purpose, prompt_tokens,
           completion_tokens, estimated, created_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
      [
        sessionId,
        turnId,
        usage.model,
        purpose,
        Math.round(usage.promptTokens),
        Math.round(usage.completionTokens),
        usage.estimated,
        this.now(),
      ],
    );
  }

  private latestCompactionRow(db: Db, sessionId: string): Promise<CompactionRow | undefined> {
    return first<CompactionRow>(
      db,
      "SELECT * FROM compactions WHERE session_id = $1 ORDER BY id DESC LIMIT 1",
      [sessionId],
    );
  }

  recordCompaction(input: CompactionInput): Promise<CompactionRecord> {
    return this.tx(async (db) => {
      // Serialised per transcript: two compactions at once must not both pass the check.
      await db.query("SELECT pg_advisory_xact_lock(hashtext($1))", [
        `keel:compaction:${input.sessionId}`,
      ]);
      const latest = await this.latestCompactionRow(db, input.sessionId);
      if (latest && input.throughSeq <= latest.through_seq) {
        throw new Error(
          `compaction through message ${input.throughSeq} does not go past the latest one (${latest.through_seq})`,
        );
      }
      const row = await first<CompactionRow>(
        db,
        `INSERT INTO compactions (session_id, turn_id, through_seq, summary, tokens_before,
             tokens_after, created_at)
           VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING *`,
        [
          input.sessionId,
          input.turnId,
          input.throughSeq,
          input.summary,
          Math.round(input.tokensBefore),
          Math.round(input.tokensAfter),
          this.now(),
        ],
      );
      if (input.usage) {
        await this.insertUsage(db, input.sessionId, input.turnId, "compaction", input.usage);
      }
      return toCompaction(row!);
    });
  }

  latestCompaction(sessionId: string): Promise<CompactionRecord | null> {
    return this.read(async (db) => {
      const row = await this.latestCompactionRow(db, sessionId);
      return row ? toCompaction(row) : null;
    });
  }

  sessionUsage(sessionId: string): Promise<UsageTotals> {
    return this.read(async (db) => {
      const totals = (await first<{
        calls: number;
        prompt: number;
        completion: number;
        estimated: number;
      }>(
        db,
        `SELECT COUNT(*) AS calls, COALESCE(SUM(prompt_tokens), 0)::bigint AS prompt,
             COALESCE(SUM(completion_tokens), 0)::bigint AS completion,
             COUNT(*) FILTER (WHERE estimated) AS estimated
           FROM model_usage WHERE session_id = $1`,
        [sessionId],
      ))!;
      const last = await first<{ prompt_tokens: number }>(
        db,
        `SELECT prompt_tokens FROM model_usage WHERE session_id = $1 AND purpose = 'turn'
           ORDER BY id DESC LIMIT 1`,
        [sessionId],
      );
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
    return this.tx(async (db) => {
      await this.ensureSessionIn(db, key, null);
      await db.query("UPDATE sessions SET model = $1 WHERE key = $2", [model, key]);
    });
  }

  listMediaSteps(inboxId: number): Promise<Record<string, unknown>> {
    return this.read(async (db) => {
      const rows = await all<{ step: string; result: string }>(
        db,
        "SELECT step, result FROM media_steps WHERE inbox_id = $1",
        [inboxId],
      );
      return Object.fromEntries(rows.map((r) => [r.step, JSON.parse(r.result) as unknown]));
    });
  }

  recordMediaStep(input: MediaStepInput): Promise<boolean> {
    return this.tx(async (db) => {
      const inserted = await changes(
        db,
        `INSERT INTO media_steps (inbox_id, step, result, created_at) VALUES ($1, $2, $3, $4)
           ON CONFLICT (inbox_id, step) DO NOTHING`,
        [input.inboxId, input.step, JSON.stringify(input.result), this.now()],
      );
      if (inserted === 0) return false;
      if (input.notice === undefined) return true;
      const row = await first<InboxRow>(db, "SELECT * FROM inbox WHERE id = $1", [input.inboxId]);
      if (!row) throw new Error(`unknown inbox item ${input.inboxId}`);
      await this.insertOutbox(db, {
        sessionKey: row.session_key,
        sessionId: row.session_id,
        turnId: null,
        address: JSON.parse(row.address) as ChatAddress,
        text: input.notice,
        kind: "notice",
      });
      return true;
    });
  }

  enqueueNoticeOnce(input: OnceNoticeInput): Promise<OutboxItem | null> {
    return this.tx(async (db) => {
      const inserted = await changes(
        db,
        `INSERT INTO session_notices (session_id, notice, created_at) VALUES ($1, $2, $3)
           ON CONFLICT (session_id, notice) DO NOTHING`,
        [input.sessionId, input.name, this.now()],
      );
      if (inserted === 0) return null;
      return this.insertOutbox(db, {
        sessionKey: input.sessionKey,
        sessionId: input.sessionId,
        turnId: null,
        address: input.address,
        text: input.text,
        kind: "notice",
      });
    });
  }

  getSentFile(id: string): Promise<SentFile | null> {
    return this.read(async (db) => {
      const r = await first<{
        id: string;
        session_key: string;
        path: string;
        name: string;
        mime: string;
        size: number;
        created_at: number;
      }>(db, "SELECT * FROM sent_files WHERE id = $1", [id]);
      if (!r) return null;
      const { session_key, created_at, ...file } = r;
      return { ...file, sessionKey: session_key, createdAt: created_at };
    });
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
    await this.pool.end();
  }
}

/** A Postgres identifier, quoted (schema names come from tests and operators). */
function quoteIdent(name: string): string {
  return `"${name.replaceAll('"', '""')}"`;
}
