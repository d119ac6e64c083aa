/**
 * OutboxStore (the outbox) on Postgres; what each method promises is in roles.ts.
 * Writes run in one transaction each (`s.tx`), reads in one snapshot (`s.read`). The statements
 * SQLite runs too are in outbox/statements.ts.
 */

import type { PgContext } from "../pg-shared.js";
import {
  all,
  changes,
  checkLease,
  ensureSessionIn,
  first,
  insertOutbox,
  pgSql,
} from "../pg-shared.js";
import type { OutboxStore } from "../roles.js";
import { type OutboxRow, type SessionRow, toOutbox } from "../store-rows.js";
import * as sql from "./statements.js";

export function pgOutbox(s: PgContext): OutboxStore {
  return {
    enqueueOutbox(input) {
      return s.tx((db) => insertOutbox(s, db, sql.queuedRow(input)));
    },

    enqueueRequestNotice(input) {
      return s.tx(async (db) => {
        await ensureSessionIn(s, db, input.sessionKey, input.address);
        // Locked: two instances giving the same notice at once give it once.
        const session = (await first<SessionRow>(
          db,
          "SELECT * FROM sessions WHERE key = $1 FOR UPDATE",
          [input.sessionKey],
        ))!;
        if (session.request_notice === input.notice) return null;
        await db.query(pgSql(sql.SET_REQUEST_NOTICE), [input.notice, input.sessionKey]);
        return insertOutbox(s, db, sql.noticeRow(input, session.session_id));
      });
    },

    enqueueNoticeOnce(input) {
      return s.tx(async (db) => {
        const params = [input.sessionId, input.name, s.now()];
        if ((await changes(db, pgSql(sql.NOTE_ONCE), params)) === 0) return null;
        return insertOutbox(s, db, sql.noticeRow(input, input.sessionId));
      });
    },

    listPendingOutbox(platform?) {
      return s.read(async (db) => {
        const rows = await all<OutboxRow>(
          db,
          `SELECT ${sql.PENDING_COLUMNS} FROM outbox o LEFT JOIN sent_files f ON f.id = o.file_id
             WHERE o.state = 'pending' AND ($1::text IS NULL OR o.platform = $1) ORDER BY o.id`,
          [platform ?? null],
        );
        return rows.map(toOutbox);
      });
    },

    markDelivered(outboxId, lease?) {
      return s.tx(async (db) => {
        await checkLease(db, lease);
        await db.query(pgSql(sql.MARK_DELIVERED), [s.now(), outboxId]);
      });
    },

    markDeliveryFailed(outboxId, maxAttempts) {
      return s.tx(async (db) => {
        await db.query(pgSql(sql.MARK_DELIVERY_FAILED), [maxAttempts, outboxId]);
      });
    },
  };
}
