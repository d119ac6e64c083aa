/**
 * What the SQLite role modules share: the context the store gives them, and the writes more
 * than one role makes (a session row, an outbox row, a transcript append, a lease check).
 */
import type Database from "better-sqlite3";
import type { ChatMessage } from "../agent/types.js";
import type { ChatAddress } from "../contract/platform.js";
import { newSessionId } from "./session-id.js";
import { INSERT_OUTBOX, INSERT_TRANSCRIPT, outboxParams } from "./shared-statements.js";
import type { LeaseToken, OutboxItem, ScheduleAdvance, SessionRecord } from "./store.js";
import { LeaseLostError } from "./store.js";
import type { NewOutboxRow } from "./store-rows.js";
import { type OutboxRow, type SessionRow, toOutbox, toSession } from "./store-rows.js";
import type { TranscriptCache } from "./transcript-cache.js";

/** What the role modules (inbox/sqlite.ts, …) get of the store: its statements, transactions, clock. */
export interface SqliteContext {
  /** A prepared statement, compiled once per SQL text. */
  stmt(sql: string): Database.Statement;
  /** Runs a read at once; settles once what it may have seen is on disk. */
  read<T>(fn: () => T): Promise<T>;
  /** Runs `fn` in the next group commit; settles once committed and (when `durable`) on disk. */
  tx<T>(fn: () => T, durable?: boolean): Promise<T>;
  /** Settles once every commit made so far is on disk. */
  untilDurable(): Promise<void>;
  now(): number;
  readonly instanceId: string | null;
  /** Parsed transcripts, kept above SQLite's page cache. */
  readonly transcripts: TranscriptCache;
}

export function sessionRow(s: SqliteContext, key: string): SessionRow | undefined {
  return s.stmt("SELECT * FROM sessions WHERE key = ?").get(key) as SessionRow | undefined;
}

/** `credential` is recorded only when this creates the row. */
export function ensureSessionSync(
  s: SqliteContext,
  key: string,
  origin: ChatAddress | null,
  credential?: string,
): SessionRow {
  const existing = sessionRow(s, key);
  if (existing) return existing;
  const now = s.now();
  const sessionId = newSessionId(now);
  const platform = origin?.platform ?? null;
  s.stmt(
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
  s.stmt(INSERT_TRANSCRIPT).run(sessionId, key, platform, now);
  return sessionRow(s, key)!;
}

/** Compare-and-set of a job's cursor (null deletes the job); false when it no longer matches. */
export function moveScheduleCursor(
  s: SqliteContext,
  advance: Pick<ScheduleAdvance, "jobId" | "expectedNextFireAt" | "nextFireAt"> &
    Partial<Pick<ScheduleAdvance, "firedSlot" | "lateMs">>,
): boolean {
  const now = s.now();
  const params = [advance.jobId, advance.expectedNextFireAt] as const;
  const changes =
    advance.nextFireAt === null
      ? s
          .stmt("DELETE FROM schedule_jobs WHERE id = ? AND next_fire_at = ? AND paused = 0")
          .run(...params).changes
      : s
          .stmt(
            `UPDATE schedule_jobs SET next_fire_at = ?, last_fire_at = COALESCE(?, last_fire_at),
               last_fired_late_ms = COALESCE(?, last_fired_late_ms), updated_at = ?
             WHERE id = ? AND next_fire_at = ? AND paused = 0`,
          )
          .run(
            advance.nextFireAt,
            advance.firedSlot ?? null,
            advance.lateMs ?? null,
            now,
            ...params,
          ).changes;
  return changes === 1;
}

export function resetSessionSync(s: SqliteContext, key: string): SessionRecord {
  const existing = ensureSessionSync(s, key, null);
  const now = s.now();
  const sessionId = newSessionId(now);
  s.stmt(
    `UPDATE sessions SET session_id = ?, resume_pending = 0, resume_reason = NULL,
         resume_marked_at = NULL, interrupt_count = 0, suspended = 0, request_notice = NULL,
         updated_at = ? WHERE key = ?`,
  ).run(sessionId, now, key);
  const platform = existing.origin ? (JSON.parse(existing.origin) as ChatAddress).platform : null;
  s.stmt(INSERT_TRANSCRIPT).run(sessionId, key, platform, now);
  return toSession(sessionRow(s, key)!);
}

export function appendSync(
  s: SqliteContext,
  sessionId: string,
  turnId: number | null,
  messages: ChatMessage[],
): void {
  const insert = s.stmt(
    "INSERT INTO messages (session_id, turn_id, role, body, created_at) VALUES (?, ?, ?, ?, ?)",
  );
  const now = s.now();
  for (const m of messages) insert.run(sessionId, turnId, m.role, JSON.stringify(m), now);
}

export function insertOutbox(s: SqliteContext, row: NewOutboxRow): OutboxItem {
  const params = outboxParams(row, s.now(), s.instanceId);
  return toOutbox(s.stmt(INSERT_OUTBOX).get(...params) as OutboxRow);
}

/** Throws (undoing this method's savepoint) when a fenced write's lease moved on. */
export function checkLease(s: SqliteContext, lease: LeaseToken | undefined): void {
  if (!lease) return;
  const held = s
    .stmt("SELECT 1 FROM session_leases WHERE session_key = ? AND owner = ? AND fence = ?")
    .get(lease.sessionKey, lease.owner, lease.fence);
  if (!held) throw new LeaseLostError(lease.sessionKey);
}
