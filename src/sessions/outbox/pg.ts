/**
 * OutboxStore (the outbox) on Postgres; what each method promises is in roles.ts.
 * Writes run in one transaction each (`s.tx`), reads in one snapshot (`s.read`).
 */
import {
  all,
  changes,
  checkLease,
  ensureSessionIn,
  first,
  insertOutbox,
  type PgContext,
} from "../pg-shared.js";
import type { OutboxStore } from "../roles.js";
import type {
  LeaseToken,
  OnceNoticeInput,
  OutboxInput,
  OutboxItem,
  RequestNoticeInput,
} from "../store.js";
import { type OutboxRow, type SessionRow, toOutbox } from "../store-rows.js";

export function pgOutbox(s: PgContext): OutboxStore {
  return {
    enqueueOutbox(input: OutboxInput): Promise<OutboxItem> {
      return s.tx((db) =>
        insertOutbox(s, db, {
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
    },

    enqueueRequestNotice(input: RequestNoticeInput): Promise<OutboxItem | null> {
      return s.tx(async (db) => {
        await ensureSessionIn(s, db, input.sessionKey, input.address);
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
        return insertOutbox(s, db, {
          sessionKey: input.sessionKey,
          sessionId: session.session_id,
          turnId: null,
          address: input.address,
          text: input.text,
          kind: "notice",
        });
      });
    },

    enqueueNoticeOnce(input: OnceNoticeInput): Promise<OutboxItem | null> {
      return s.tx(async (db) => {
        const inserted = await changes(
          db,
          `INSERT INTO session_notices (session_id, notice, created_at) VALUES ($1, $2, $3)
             ON CONFLICT (session_id, notice) DO NOTHING`,
          [input.sessionId, input.name, s.now()],
        );
        if (inserted === 0) return null;
        return insertOutbox(s, db, {
          sessionKey: input.sessionKey,
          sessionId: input.sessionId,
          turnId: null,
          address: input.address,
          text: input.text,
          kind: "notice",
        });
      });
    },

    listPendingOutbox(platform?: string): Promise<OutboxItem[]> {
      return s.read(async (db) =>
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
    },

    markDelivered(outboxId: number, lease?: LeaseToken): Promise<void> {
      return s.tx(async (db) => {
        await checkLease(db, lease);
        await db.query(
          `UPDATE outbox SET state = 'delivered', delivered_at = $1, attempts = attempts + 1
             WHERE id = $2`,
          [s.now(), outboxId],
        );
      });
    },

    markDeliveryFailed(outboxId: number, maxAttempts: number): Promise<void> {
      return s.tx(async (db) => {
        await db.query(
          `UPDATE outbox SET attempts = attempts + 1,
               state = CASE WHEN attempts + 1 >= $1 THEN 'failed' ELSE state END
             WHERE id = $2 AND state IN ('pending', 'sending')`,
          [maxAttempts, outboxId],
        );
      });
    },
  };
}
