/**
 * The SQLite implementation of Store (better-sqlite3, synchronous inside, one transaction per
 * method). Durability: WAL with synchronous=FULL, so a committed transaction survives both a
 * process crash and power loss (docs/architecture.md, "Durability").
 *
 * Group commit: the methods called within one turn of the event loop run in call order inside
 * one SQLite transaction, each in its own savepoint (a failing method undoes only its own
 * changes), and every promise settles only after that transaction has committed. One fsync
 * then covers many methods; "committed before the promise resolves" holds for each of them.
 */
import { mkdirSync } from "node:fs";
import { dirname } from "node:path";
import Database from "better-sqlite3";
import type { ChatMessage } from "../agent/types.js";
import type { ChatAddress, InboundMessage } from "../platforms/platform.js";
import { newPairingCode, newSessionId } from "./session-id.js";
import { MIGRATIONS } from "./sqlite-migrations.js";
import {
  type InboxRow,
  type MessageRow,
  type OutboxRow,
  type PairingRow,
  type SessionRow,
  type ToolCallRow,
  type TurnRow,
  toInbox,
  toOutbox,
  toPairing,
  toSession,
  toStoredMessage,
  toToolCall,
  toTurn,
} from "./sqlite-rows.js";
import type {
  FinishTurnInput,
  InboxItem,
  OutboxInput,
  OutboxItem,
  PairingRequest,
  PairingRequestInput,
  ResumeReason,
  SessionRecord,
  SessionSummary,
  StartTurnInput,
  Store,
  ToolFinishInput,
  ToolStartInput,
  TurnRecord,
} from "./store.js";

export interface SqliteStoreOptions {
  /** Injected clock (epoch ms). */
  now?: () => number;
  /** Open without running migrations or writing (CLI inspection of a live gateway's db). */
  readonly?: boolean;
}

interface PendingTx {
  fn: () => unknown;
  resolve(value: unknown): void;
  reject(err: unknown): void;
}

export class SqliteStore implements Store {
  private readonly db: Database.Database;
  private readonly now: () => number;
  /** Methods waiting for the next group commit, in call order. */
  private pending: PendingTx[] = [];
  private flushScheduled = false;
  private readonly statements = new Map<string, Database.Statement>();

  constructor(path: string, options: SqliteStoreOptions = {}) {
    this.now = options.now ?? Date.now;
    if (!options.readonly) mkdirSync(dirname(path), { recursive: true });
    this.db = new Database(path, {
      readonly: options.readonly ?? false,
      fileMustExist: options.readonly ?? false,
    });
    this.db.pragma("busy_timeout = 5000");
    if (!options.readonly) {
      this.db.pragma("journal_mode = WAL");
      this.db.pragma("synchronous = FULL");
      this.db.pragma("foreign_keys = ON");
      this.migrate();
    }
  }

  /** Schema version after migrations (for doctor and tests). */
  schemaVersion(): number {
    return this.db.pragma("user_version", { simple: true }) as number;
  }

  private migrate(): void {
    const current = this.schemaVersion();
    for (let v = current; v < MIGRATIONS.length; v++) {
      this.db.transaction(() => {
        this.db.exec(MIGRATIONS[v]!);
        this.db.pragma(`user_version = ${v + 1}`);
      })();
    }
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
   * includes every write a caller has awaited. Reads never wait for another batch's fsync.
   */
  private read<T>(fn: () => T): Promise<T> {
    try {
      return Promise.resolve(fn());
    } catch (err) {
      return Promise.reject(err);
    }
  }

  /** Runs `fn` in the next group commit; settles after that transaction committed. */
  private tx<T>(fn: () => T): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.pending.push({ fn, resolve: resolve as (value: unknown) => void, reject });
      if (this.flushScheduled) return;
      this.flushScheduled = true;
      setImmediate(() => this.flush());
    });
  }

  private flush(): void {
    this.flushScheduled = false;
    const batch = this.pending;
    this.pending = [];
    if (batch.length === 0) return;
    const outcomes: ({ ok: true; value: unknown } | { ok: false; error: unknown })[] = [];
    try {
      this.db
        .transaction(() => {
          for (const item of batch) {
            try {
              // Nested: a savepoint, rolled back alone when `fn` throws.
              outcomes.push({ ok: true, value: this.db.transaction(item.fn)() });
            } catch (error) {
              outcomes.push({ ok: false, error });
            }
          }
        })
        .immediate();
    } catch (err) {
      // Nothing of this batch was committed (or the database is closed).
      for (const item of batch) item.reject(err);
      return;
    }
    batch.forEach((item, i) => {
      const outcome = outcomes[i]!;
      if (outcome.ok) item.resolve(outcome.value);
      else item.reject(outcome.error);
    });
  }

  private sessionRow(key: string): SessionRow | undefined {
    return this.stmt("SELECT * FROM sessions WHERE key = ?").get(key) as SessionRow | undefined;
  }

  private ensureSessionSync(key: string, origin: ChatAddress | null): SessionRow {
    const existing = this.sessionRow(key);
    if (existing) return existing;
    const now = this.now();
    const sessionId = newSessionId(now);
    const platform = origin?.platform ?? null;
    this.stmt(
      `INSERT INTO sessions (key, session_id, platform, origin, created_at, updated_at)
         VALUES (?, ?, ?, ?, ?, ?)`,
    ).run(key, sessionId, platform, origin ? JSON.stringify(origin) : null, now, now);
    this.stmt(
      "INSERT INTO transcripts (session_id, session_key, platform, created_at) VALUES (?, ?, ?, ?)",
    ).run(sessionId, key, platform, now);
    return this.sessionRow(key)!;
  }

  acceptInbound(message: InboundMessage): Promise<{ accepted: boolean; item: InboxItem }> {
    return this.tx(() => {
      const session = this.ensureSessionSync(message.sessionKey, message.address);
      const now = this.now();
      const inserted = this.stmt(
        `INSERT INTO inbox (platform, chat_id, platform_message_id, session_key, session_id, text,
             sender_id, sender_name, address, state, received_at)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending', ?)
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
        now,
      );
      if (inserted.changes === 1) {
        this.stmt("UPDATE sessions SET origin = ?, updated_at = ? WHERE key = ?").run(
          JSON.stringify(message.address),
          now,
          message.sessionKey,
        );
        if (message.history?.length && !this.hasMessages(session.session_id)) {
          this.appendSync(session.session_id, null, message.history);
        }
      }
      const row = this.stmt(
        "SELECT * FROM inbox WHERE platform = ? AND chat_id = ? AND platform_message_id = ?",
      ).get(message.platform, message.chatId, message.platformMessageId) as InboxRow;
      return { accepted: inserted.changes === 1, item: toInbox(row) };
    });
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

  closeInboxItem(
    inboxId: number,
    state: "done" | "cancelled",
    notice?: string,
  ): Promise<OutboxItem | null> {
    return this.tx(() => {
      this.stmt("UPDATE inbox SET state = ? WHERE id = ?").run(state, inboxId);
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
    return this.tx(() => {
      const existing = this.ensureSessionSync(key, null);
      const now = this.now();
      const sessionId = newSessionId(now);
      this.stmt(
        `UPDATE sessions SET session_id = ?, resume_pending = 0, resume_reason = NULL,
             resume_marked_at = NULL, interrupt_count = 0, suspended = 0, updated_at = ? WHERE key = ?`,
      ).run(sessionId, now, key);
      const platform = existing.origin
        ? (JSON.parse(existing.origin) as ChatAddress).platform
        : null;
      this.stmt(
        "INSERT INTO transcripts (session_id, session_key, platform, created_at) VALUES (?, ?, ?, ?)",
      ).run(sessionId, key, platform, now);
      return toSession(this.sessionRow(key)!);
    });
  }

  listSessions(options: { limit?: number; platform?: string } = {}): Promise<SessionSummary[]> {
    return this.read(() => {
      const rows = this.stmt(
        `SELECT s.key, s.session_id, s.platform, s.resume_pending, s.suspended, s.updated_at,
             (SELECT COUNT(*) FROM messages m WHERE m.session_id = s.session_id) AS message_count,
             (SELECT body FROM messages m WHERE m.session_id = s.session_id ORDER BY seq DESC LIMIT 1) AS last_body
           FROM sessions s
           WHERE (? IS NULL OR s.platform = ?)
           ORDER BY s.updated_at DESC LIMIT ?`,
      ).all(
        options.platform ?? null,
        options.platform ?? null,
        options.limit ?? 100,
      ) as (SessionRow & {
        platform: string | null;
        message_count: number;
        last_body: string | null;
      })[];
      return rows.map((r) => ({
        key: r.key,
        sessionId: r.session_id,
        platform: r.platform,
        messageCount: r.message_count,
        lastMessage: r.last_body ? summarize(JSON.parse(r.last_body) as ChatMessage) : null,
        resumePending: r.resume_pending === 1,
        suspended: r.suspended === 1,
        updatedAt: r.updated_at,
      }));
    });
  }

  loadTranscript(sessionId: string) {
    return this.read(() =>
      (
        this.stmt(
          "SELECT seq, turn_id, body, created_at FROM messages WHERE session_id = ? ORDER BY seq",
        ).all(sessionId) as MessageRow[]
      ).map(toStoredMessage),
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
  ): Promise<void> {
    return this.tx(() => {
      this.appendSync(sessionId, turnId, messages);
      const close = this.stmt("UPDATE inbox SET state = 'done' WHERE id = ?");
      for (const id of closeInboxIds) close.run(id);
    });
  }

  startTurn(input: StartTurnInput): Promise<TurnRecord> {
    return this.tx(() => {
      const session = this.ensureSessionSync(input.sessionKey, null);
      const now = this.now();
      const { lastInsertRowid } = this.stmt(
        `INSERT INTO turns (session_key, session_id, inbox_id, state, started_at)
           VALUES (?, ?, ?, 'running', ?)`,
      ).run(input.sessionKey, session.session_id, input.inboxId, now);
      const turnId = Number(lastInsertRowid);
      if (input.inboxId !== null) {
        this.stmt("UPDATE inbox SET state = 'running' WHERE id = ?").run(input.inboxId);
      }
      if (input.userMessage) this.appendSync(session.session_id, turnId, [input.userMessage]);
      this.stmt("UPDATE sessions SET updated_at = ? WHERE key = ?").run(now, input.sessionKey);
      return toTurn(this.stmt("SELECT * FROM turns WHERE id = ?").get(turnId) as TurnRow);
    });
  }

  finishTurn(input: FinishTurnInput): Promise<OutboxItem | null> {
    return this.tx(() => {
      const turn = this.stmt("SELECT * FROM turns WHERE id = ?").get(input.turnId) as
        | TurnRow
        | undefined;
      if (!turn) throw new Error(`unknown turn ${input.turnId}`);
      const now = this.now();
      this.stmt("UPDATE turns SET state = ?, finished_at = ? WHERE id = ?").run(
        input.state,
        now,
        input.turnId,
      );
      if (turn.inbox_id !== null) {
        this.stmt("UPDATE inbox SET state = 'done' WHERE id = ?").run(turn.inbox_id);
      }
      if (input.finalMessage) this.appendSync(turn.session_id, input.turnId, [input.finalMessage]);
      if (input.state === "done") {
        // A finished turn ends the interruption streak and any pending resume.
        this.stmt(
          `UPDATE sessions SET interrupt_count = 0, resume_pending = 0, resume_reason = NULL,
               resume_marked_at = NULL, updated_at = ? WHERE key = ? AND session_id = ?`,
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
    state: "pending" | "sending" = "pending",
  ): OutboxItem {
    const { lastInsertRowid } = this.stmt(
      `INSERT INTO outbox (session_key, session_id, turn_id, platform, address, text, kind, state, created_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    ).run(
      sessionKey,
      sessionId,
      turnId,
      address.platform,
      JSON.stringify(address),
      text,
      kind,
      state,
      this.now(),
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
      const now = this.now();
      this.stmt(
        `UPDATE tool_calls SET state = 'finished', result = ?, finished_at = ?
           WHERE turn_id = ? AND tool_call_id = ? AND state = 'started'`,
      ).run(input.result, now, input.turnId, input.toolCallId);
      this.appendSync(input.sessionId, input.turnId, [
        { role: "tool", tool_call_id: input.toolCallId, content: input.result },
      ]);
    });
  }

  listUnfinishedToolCalls(sessionId: string) {
    return this.read(() =>
      (
        this.stmt(
          "SELECT * FROM tool_calls WHERE session_id = ? AND state = 'started' ORDER BY id",
        ).all(sessionId) as ToolCallRow[]
      ).map(toToolCall),
    );
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
      ),
    );
  }

  listPendingOutbox(platform?: string): Promise<OutboxItem[]> {
    return this.read(() =>
      (
        this.stmt(
          "SELECT * FROM outbox WHERE state = 'pending' AND (? IS NULL OR platform = ?) ORDER BY id",
        ).all(platform ?? null, platform ?? null) as OutboxRow[]
      ).map(toOutbox),
    );
  }

  markDelivered(outboxId: number): Promise<void> {
    return this.tx(() => {
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

  approvePairing(code: string): Promise<PairingRequest | null> {
    return this.tx(() => {
      const now = this.now();
      const row = this.stmt(
        "SELECT * FROM pairing WHERE code = ? AND approved_at IS NULL AND expires_at > ?",
      ).get(code.trim().toUpperCase(), now) as PairingRow | undefined;
      if (!row) return null;
      this.stmt("UPDATE pairing SET approved_at = ? WHERE code = ?").run(now, row.code);
      return toPairing({ ...row, approved_at: now });
    });
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

  async backup(path: string): Promise<void> {
    await this.db.backup(path);
  }

  /** Commits what is already queued, then closes; later calls reject (the database is closed). */
  close(): Promise<void> {
    if (this.db.open) {
      this.flush();
      this.db.close();
    }
    return Promise.resolve();
  }
}

function summarize(message: ChatMessage): string | null {
  const text = message.content ?? "";
  return text.length > 120 ? `${text.slice(0, 117)}...` : text;
}
