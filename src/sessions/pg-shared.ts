/**
 * What the Postgres role modules share: the context the store gives them and the writes more
 * than one role makes (a session row, an outbox row, a transcript append, a lease check).
 */
import type pg from "pg";
import type { ChatMessage } from "../agent/types.js";
import type { ChatAddress } from "../contract/platform.js";
import { newSessionId } from "./session-id.js";
import { INSERT_OUTBOX, INSERT_TRANSCRIPT, outboxParams } from "./shared-statements.js";
import type { LeaseToken, OutboxItem, ScheduleAdvance, SessionRecord } from "./store.js";
import { LeaseLostError } from "./store.js";
import type { NewOutboxRow } from "./store-rows.js";
import { type OutboxRow, type SessionRow, toOutbox, toSession } from "./store-rows.js";

/** What the role modules (inbox/pg.ts, …) get of the store: its transactions and clock. */
export interface PgContext {
  /** A read: one snapshot, so a read of several statements sees one committed state. */
  read<T>(fn: (db: Db) => Promise<T>): Promise<T>;
  /** A write: one transaction, after the migrations. */
  tx<T>(fn: (db: Db) => Promise<T>): Promise<T>;
  now(): number;
  readonly instanceId: string | null;
}

/** One connection, inside or outside a transaction. */
export type Db = pg.ClientBase;

/**
 * The database's clock in epoch ms. Leases and heartbeats are compared across instances, so they
 * use this one clock, never an instance's (clock_timestamp: the time now, not the transaction's
 * start).
 */
export const DB_NOW = "(extract(epoch FROM clock_timestamp()) * 1000)::bigint";

const converted = new Map<string, string>();

/**
 * A statement both engines run, written once with SQLite's `?` placeholders (the role's
 * statements.ts), in Postgres's `$1, $2, …`. Shared texts hold no `?` but placeholders.
 */
export function pgSql(sql: string): string {
  let text = converted.get(sql);
  if (text === undefined) {
    let n = 0;
    text = sql.replaceAll("?", () => `$${++n}`);
    converted.set(sql, text);
  }
  return text;
}

export async function all<T>(db: Db, sql: string, params: unknown[] = []): Promise<T[]> {
  return (await db.query(sql, params)).rows as T[];
}

export async function first<T>(
  db: Db,
  sql: string,
  params: unknown[] = [],
): Promise<T | undefined> {
  return (await db.query(sql, params)).rows[0] as T | undefined;
}

export async function changes(db: Db, sql: string, params: unknown[] = []): Promise<number> {
  return (await db.query(sql, params)).rowCount ?? 0;
}

export function sessionRow(db: Db, key: string): Promise<SessionRow | undefined> {
  return first<SessionRow>(db, "SELECT * FROM sessions WHERE key = $1", [key]);
}

/** Creates the session row unless it exists; a concurrent creator's row wins and is returned. */
export async function ensureSessionIn(
  s: PgContext,
  db: Db,
  key: string,
  origin: ChatAddress | null,
  credential?: string,
): Promise<SessionRow> {
  const existing = await sessionRow(db, key);
  if (existing) return existing;
  const now = s.now();
  const sessionId = newSessionId(now);
  const platform = origin?.platform ?? null;
  const created = await first<SessionRow>(
    db,
    `INSERT INTO sessions (key, session_id, platform, origin, credential, created_at, updated_at)
       VALUES ($1, $2, $3, $4, $5, $6, $6) ON CONFLICT (key) DO NOTHING RETURNING *`,
    [key, sessionId, platform, origin ? JSON.stringify(origin) : null, credential ?? null, now],
  );
  if (!created) return (await sessionRow(db, key))!;
  await db.query(pgSql(INSERT_TRANSCRIPT), [sessionId, key, platform, now]);
  return created;
}

/** Compare-and-set of a job's cursor (null deletes the job); false when it no longer matches. */
export async function moveScheduleCursor(
  s: PgContext,
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
            s.now(),
          ],
        );
  return moved === 1;
}

export async function resetSessionIn(s: PgContext, db: Db, key: string): Promise<SessionRecord> {
  await ensureSessionIn(s, db, key, null);
  const existing = (await first<SessionRow>(
    db,
    "SELECT * FROM sessions WHERE key = $1 FOR UPDATE",
    [key],
  ))!;
  const now = s.now();
  const sessionId = newSessionId(now);
  const updated = (await first<SessionRow>(
    db,
    `UPDATE sessions SET session_id = $1, resume_pending = FALSE, resume_reason = NULL,
         resume_marked_at = NULL, interrupt_count = 0, suspended = FALSE, request_notice = NULL,
         updated_at = $2 WHERE key = $3 RETURNING *`,
    [sessionId, now, key],
  ))!;
  const platform = existing.origin ? (JSON.parse(existing.origin) as ChatAddress).platform : null;
  await db.query(pgSql(INSERT_TRANSCRIPT), [sessionId, key, platform, now]);
  return toSession(updated);
}

/** Appends in one statement; sequence numbers follow the array's order. */
export async function appendIn(
  s: PgContext,
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
      s.now(),
      messages.map((m) => m.role),
      messages.map((m) => JSON.stringify(m)),
    ],
  );
}

export async function insertOutbox(s: PgContext, db: Db, row: NewOutboxRow): Promise<OutboxItem> {
  const params = outboxParams(row, s.now(), s.instanceId);
  return toOutbox((await first<OutboxRow>(db, pgSql(INSERT_OUTBOX), params))!);
}

/**
 * checkLease for many, in one statement: LeaseLostError for the first that moved on. The rows are
 * locked in key order, the order claimSessionLeases takes them in, so the two cannot deadlock.
 */
export async function checkLeases(db: Db, leases: readonly LeaseToken[]): Promise<void> {
  if (leases.length === 0) return;
  const id = (key: string, owner: string, fence: number | string) => `${key}\n${owner}\n${fence}`;
  const held = new Set(
    (
      await all<{ session_key: string; owner: string; fence: number | string }>(
        db,
        `SELECT session_key, owner, fence FROM session_leases
           WHERE (session_key, owner, fence) IN (
             SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[]))
           ORDER BY session_key FOR SHARE`,
        [leases.map((l) => l.sessionKey), leases.map((l) => l.owner), leases.map((l) => l.fence)],
      )
    ).map((row) => id(row.session_key, row.owner, row.fence)),
  );
  const lost = leases.find((l) => !held.has(id(l.sessionKey, l.owner, l.fence)));
  if (lost) throw new LeaseLostError(lost.sessionKey);
}

/**
 * Throws when a fenced write's lease moved on. The row stays share-locked until this
 * transaction ends, so a claim by another instance waits for this write instead of passing it.
 */
export async function checkLease(db: Db, lease: LeaseToken | undefined): Promise<void> {
  if (!lease) return;
  const held = await first(
    db,
    `SELECT 1 FROM session_leases WHERE session_key = $1 AND owner = $2 AND fence = $3
       FOR SHARE`,
    [lease.sessionKey, lease.owner, lease.fence],
  );
  if (!held) throw new LeaseLostError(lease.sessionKey);
}
