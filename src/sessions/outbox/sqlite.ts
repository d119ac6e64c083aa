/**
 * OutboxStore (the outbox) on SQLite; what each method promises is in roles.ts.
 * Writes run in the group commit (`s.tx`), reads through `s.read`.
 */
import type { OutboxStore } from "../roles.js";
import {
  checkLease,
  ensureSessionSync,
  insertOutbox,
  type SqliteContext,
} from "../sqlite-shared.js";
import type {
  LeaseToken,
  OnceNoticeInput,
  OutboxInput,
  OutboxItem,
  RequestNoticeInput,
} from "../store.js";
import { type OutboxRow, toOutbox } from "../store-rows.js";

export function sqliteOutbox(s: SqliteContext): OutboxStore {
  return {
    enqueueOutbox(input: OutboxInput): Promise<OutboxItem> {
      return s.tx(() =>
        insertOutbox(s, {
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
      return s.tx(() => {
        const session = ensureSessionSync(s, input.sessionKey, input.address);
        if (session.request_notice === input.notice) return null;
        s.stmt("UPDATE sessions SET request_notice = ? WHERE key = ?").run(
          input.notice,
          input.sessionKey,
        );
        return insertOutbox(s, {
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
      return s.tx(() => {
        const { changes } = s
          .stmt(
            `INSERT INTO session_notices (session_id, notice, created_at) VALUES (?, ?, ?)
             ON CONFLICT (session_id, notice) DO NOTHING`,
          )
          .run(input.sessionId, input.name, s.now());
        if (changes === 0) return null;
        return insertOutbox(s, {
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
      // Through the partial index of pending rows, named: left to itself SQLite scans the whole
      // table in id order to spare a sort, and every reply ever sent stays in that table.
      const select = `SELECT o.*, f.path AS file_path, f.name AS file_name, f.mime AS file_mime,
           f.size AS file_size
         FROM outbox o INDEXED BY outbox_pending LEFT JOIN sent_files f ON f.id = o.file_id
         WHERE o.state = 'pending'`;
      return s.read(() => {
        const rows = platform
          ? s.stmt(`${select} AND o.platform = ? ORDER BY o.id`).all(platform)
          : s.stmt(`${select} ORDER BY o.id`).all();
        return (rows as OutboxRow[]).map(toOutbox);
      });
    },

    markDelivered(outboxId: number, lease?: LeaseToken): Promise<void> {
      return s.tx(() => {
        checkLease(s, lease);
        s.stmt(
          "UPDATE outbox SET state = 'delivered', delivered_at = ?, attempts = attempts + 1 WHERE id = ?",
        ).run(s.now(), outboxId);
      });
    },

    markDeliveryFailed(outboxId: number, maxAttempts: number): Promise<void> {
      return s.tx(() => {
        s.stmt(
          `UPDATE outbox SET attempts = attempts + 1,
               state = CASE WHEN attempts + 1 >= ? THEN 'failed' ELSE state END
             WHERE id = ? AND state IN ('pending', 'sending')`,
        ).run(maxAttempts, outboxId);
      });
    },
  };
}
