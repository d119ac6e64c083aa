/**
 * InboxStore (the inbox) on Postgres; what each method promises is in roles.ts.
 * Writes run in one transaction each (`s.tx`), reads in one snapshot (`s.read`). The statements
 * SQLite runs too are in inbox/statements.ts.
 */
import type { ChatAddress, IdempotencyClaim } from "../../contract/platform.js";
import type { Db, PgContext } from "../pg-shared.js";
import {
  all,
  appendIn,
  changes,
  DB_NOW,
  ensureSessionIn,
  first,
  insertOutbox,
  moveScheduleCursor,
  pgSql,
} from "../pg-shared.js";
import { runSteps } from "../read-steps.js";
import type { InboxStore } from "../roles.js";
import type { AcceptInboundResult } from "../store.js";
import { ScheduleChangedError } from "../store.js";
import { type InboxRow, toInbox } from "../store-rows.js";
import * as sql from "./statements.js";

function keyRow(db: Db, scope: string, key: string, now: number) {
  return first<sql.KeyRow>(db, pgSql(sql.SELECT_KEY), [scope, key, now]);
}

export function pgInbox(s: PgContext): InboxStore {
  const inbox: InboxStore = {
    acceptInbound(message, advance?) {
      return s.tx(async (db) => {
        if (advance && !(await moveScheduleCursor(s, db, advance))) {
          throw new ScheduleChangedError(advance.jobId);
        }
        const now = s.now();
        const claim = message.idempotency;
        if (claim) {
          const repeat = await seenClaim(db, claim, now);
          if (repeat) return repeat;
        }
        const { sessionKey, address, credential } = message;
        const session = await ensureSessionIn(s, db, sessionKey, address, credential);
        const params = sql.itemParams(message, session.session_id, now, s.instanceId);
        const inserted = await first<InboxRow>(db, pgSql(sql.INSERT_ITEM), params);
        if (!inserted) {
          const { platform, chatId, platformMessageId } = message;
          const row = await first<InboxRow>(db, pgSql(sql.SELECT_PLATFORM_MESSAGE), [
            platform,
            chatId,
            platformMessageId,
          ]);
          return { accepted: false, item: toInbox(row!) };
        }
        await db.query(pgSql(sql.TOUCH_SESSION), [now, sessionKey]);
        if (message.history?.length) {
          const started = await first(db, pgSql(sql.HAS_MESSAGES), [session.session_id]);
          if (!started) await appendIn(s, db, session.session_id, null, message.history);
        }
        if (claim) await db.query(pgSql(sql.INSERT_KEY), sql.keyParams(claim, inserted.id, now));
        return { accepted: true, item: toInbox(inserted) };
      });
    },

    // A commit here is on disk once it returns.
    async commitInbound(message, advance?) {
      return { ...(await inbox.acceptInbound(message, advance)), onDisk: Promise.resolve() };
    },

    hasOpenInbox(platform, chatId) {
      return s.read(
        async (db) => (await first(db, pgSql(sql.HAS_OPEN), [platform, chatId])) !== undefined,
      );
    },

    findIdempotencyKey(scope, key) {
      return s.read(async (db) => {
        const row = await keyRow(db, scope, key, s.now());
        return row
          ? { requestHash: row.request_hash, item: toInbox(row), expiresAt: row.expires_at }
          : null;
      });
    },

    findThread(thread) {
      return s.read(async (db) => {
        const row = await first<{ session_key: string; session_id: string }>(
          db,
          pgSql(sql.SELECT_THREAD),
          [thread],
        );
        return row ? { sessionKey: row.session_key, sessionId: row.session_id } : null;
      });
    },

    findInboxAnswer(inboxId) {
      return s.read((db) =>
        runSteps(sql.answerSteps(inboxId), (q) => first(db, pgSql(q.sql), q.params)),
      );
    },

    listOpenInbox() {
      return s.read(async (db) => (await all<InboxRow>(db, sql.LIST_OPEN)).map(toInbox));
    },

    adoptPendingInbox(owner, staleMs, options = {}) {
      return s.tx(async (db) => {
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
    },

    closeInboxItem(inboxId, state, notice?) {
      return s.tx(async (db) => {
        const row = await first<InboxRow>(
          db,
          "UPDATE inbox SET state = $1 WHERE id = $2 RETURNING *",
          [state, inboxId],
        );
        if (state === "cancelled") await db.query(pgSql(sql.DROP_ITEM_KEYS), [inboxId]);
        if (notice === undefined) return null;
        if (!row) throw new Error(`unknown inbox item ${inboxId}`);
        const address = JSON.parse(row.address) as ChatAddress;
        const session = await ensureSessionIn(s, db, row.session_key, address);
        return insertOutbox(s, db, {
          ...sql.itemNoticeRow(row, session.session_id, notice),
          inboxId,
        });
      });
    },

    listMediaSteps(inboxId) {
      return s.read(async (db) =>
        sql.toMediaSteps(await all(db, pgSql(sql.LIST_MEDIA_STEPS), [inboxId])),
      );
    },

    recordMediaStep(input) {
      return s.tx(async (db) => {
        const { inboxId, step, result, notice } = input;
        const params = [inboxId, step, JSON.stringify(result), s.now()];
        if ((await changes(db, pgSql(sql.RECORD_MEDIA_STEP), params)) === 0) return false;
        if (notice === undefined) return true;
        const row = await first<InboxRow>(db, pgSql(sql.SELECT_ITEM), [inboxId]);
        if (!row) throw new Error(`unknown inbox item ${inboxId}`);
        await insertOutbox(s, db, sql.itemNoticeRow(row, row.session_id, notice));
        return true;
      });
    },
  };
  return inbox;
}

/**
 * The answer to a request whose Idempotency-Key is stored already (a repeat), or null. The key
 * is locked for the transaction: requests with the same key queue here.
 */
async function seenClaim(
  db: Db,
  claim: IdempotencyClaim,
  now: number,
): Promise<AcceptInboundResult | null> {
  // The key is not stored yet, so no row to lock: the second request finds the first's key.
  await db.query("SELECT pg_advisory_xact_lock(hashtext($1))", [
    `keel:idempotency:${claim.scope}:${claim.key}`,
  ]);
  await db.query(pgSql(sql.DROP_EXPIRED_KEYS), [now]);
  const seen = await keyRow(db, claim.scope, claim.key, now);
  // Checked before anything is written: a repeat must not even create its session.
  return seen ? sql.repeatOf(seen, claim) : null;
}
