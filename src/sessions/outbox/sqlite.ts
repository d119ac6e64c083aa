/**
 * OutboxStore (the outbox) on SQLite; what each method promises is in roles.ts.
 * Writes run in the group commit (`s.tx`), reads through `s.read`. The statements Postgres runs
 * too are in outbox/statements.ts.
 */
import type { OutboxStore } from "../roles.js";
import {
  checkLease,
  ensureSessionSync,
  insertOutbox,
  type SqliteContext,
} from "../sqlite-shared.js";
import { type OutboxRow, toOutbox } from "../store-rows.js";
import * as sql from "./statements.js";

export function sqliteOutbox(s: SqliteContext): OutboxStore {
  return {
    enqueueOutbox(input) {
      return s.tx(() => insertOutbox(s, sql.queuedRow(input)));
    },

    enqueueRequestNotice(input) {
      return s.tx(() => {
        const session = ensureSessionSync(s, input.sessionKey, input.address);
        if (session.request_notice === input.notice) return null;
        s.stmt(sql.SET_REQUEST_NOTICE).run(input.notice, input.sessionKey);
        return insertOutbox(s, sql.noticeRow(input, session.session_id));
      });
    },

    enqueueNoticeOnce(input) {
      return s.tx(() => {
        const noted = s.stmt(sql.NOTE_ONCE).run(input.sessionId, input.name, s.now());
        if (noted.changes === 0) return null;
        return insertOutbox(s, sql.noticeRow(input, input.sessionId));
      });
    },

    listPendingOutbox(platform?) {
      // Through the partial index of pending rows, named: left to itself SQLite scans the whole
      // table in id order to spare a sort, and every reply ever sent stays in that table.
      const select = `SELECT ${sql.PENDING_COLUMNS}
         FROM outbox o INDEXED BY outbox_pending LEFT JOIN sent_files f ON f.id = o.file_id
         WHERE o.state = 'pending'`;
      return s.read(() => {
        const rows = platform
          ? s.stmt(`${select} AND o.platform = ? ORDER BY o.id`).all(platform)
          : s.stmt(`${select} ORDER BY o.id`).all();
        return (rows as OutboxRow[]).map(toOutbox);
      });
    },

    markDelivered(outboxId, lease?) {
      return s.tx(() => {
        checkLease(s, lease);
        s.stmt(sql.MARK_DELIVERED).run(s.now(), outboxId);
      });
    },

    markDeliveryFailed(outboxId, maxAttempts) {
      return s.tx(() => {
        s.stmt(sql.MARK_DELIVERY_FAILED).run(maxAttempts, outboxId);
      });
    },
  };
}
