/**
 * InboxStore (the inbox) on SQLite; what each method promises is in roles.ts.
 * Writes run in the group commit (`s.tx`), reads through `s.read`. The statements Postgres runs
 * too are in inbox/statements.ts.
 */
import type { ChatAddress, InboundMessage } from "../../contract/platform.js";
import { runStepsSync } from "../read-steps.js";
import type { InboxStore } from "../roles.js";
import {
  appendSync,
  ensureSessionSync,
  insertOutbox,
  moveScheduleCursor,
  type SqliteContext,
} from "../sqlite-shared.js";
import { type AcceptInboundResult, type ScheduleAdvance, ScheduleChangedError } from "../store.js";
import { type InboxRow, toInbox } from "../store-rows.js";
import * as sql from "./statements.js";

function keyRow(s: SqliteContext, scope: string, key: string, now: number) {
  return s.stmt(sql.SELECT_KEY).get(scope, key, now) as sql.KeyRow | undefined;
}

/** The inbox row of an inbound message, or the one already stored for it (see roles.ts). */
function acceptSync(
  s: SqliteContext,
  message: InboundMessage,
  advance: ScheduleAdvance | undefined,
): AcceptInboundResult {
  if (advance && !moveScheduleCursor(s, advance)) {
    throw new ScheduleChangedError(advance.jobId);
  }
  const now = s.now();
  const claim = message.idempotency;
  if (claim) {
    s.stmt(sql.DROP_EXPIRED_KEYS).run(now);
    const seen = keyRow(s, claim.scope, claim.key, now);
    // Checked before anything is written: a repeat must not even create its session.
    if (seen) return sql.repeatOf(seen, claim);
  }
  const { sessionKey, address, credential } = message;
  const session = ensureSessionSync(s, sessionKey, address, credential);
  const params = sql.itemParams(message, session.session_id, now, s.instanceId);
  const inserted = s.stmt(sql.INSERT_ITEM).get(...params) as InboxRow | undefined;
  if (!inserted) {
    const { platform, chatId, platformMessageId } = message;
    const row = s
      .stmt(sql.SELECT_PLATFORM_MESSAGE)
      .get(platform, chatId, platformMessageId) as InboxRow;
    return { accepted: false, item: toInbox(row) };
  }
  s.stmt(sql.TOUCH_SESSION).run(now, sessionKey);
  if (message.history?.length && !s.stmt(sql.HAS_MESSAGES).get(session.session_id)) {
    appendSync(s, session.session_id, null, message.history);
  }
  if (claim) s.stmt(sql.INSERT_KEY).run(...sql.keyParams(claim, inserted.id, now));
  return { accepted: true, item: toInbox(inserted) };
}

export function sqliteInbox(s: SqliteContext): InboxStore {
  return {
    acceptInbound(message, advance?) {
      return s.tx(() => acceptSync(s, message, advance));
    },

    commitInbound(message, advance?) {
      // Readers need not wait for it either: what they do with it outside the gateway waits
      // for a later commit's flush, which covers this one.
      return s
        .tx(() => acceptSync(s, message, advance), false)
        .then((result) => ({ ...result, onDisk: s.untilDurable() }));
    },

    hasOpenInbox(platform, chatId) {
      return s.read(() => s.stmt(sql.HAS_OPEN).get(platform, chatId) !== undefined);
    },

    findIdempotencyKey(scope, key) {
      return s.read(() => {
        const row = keyRow(s, scope, key, s.now());
        return row
          ? { requestHash: row.request_hash, item: toInbox(row), expiresAt: row.expires_at }
          : null;
      });
    },

    findThread(thread) {
      return s.read(() => {
        const row = s.stmt(sql.SELECT_THREAD).get(thread) as
          | { session_key: string; session_id: string }
          | undefined;
        return row ? { sessionKey: row.session_key, sessionId: row.session_id } : null;
      });
    },

    findInboxAnswer(inboxId) {
      return s.read(() =>
        runStepsSync(sql.answerSteps(inboxId), (q) => s.stmt(q.sql).get(...q.params)),
      );
    },

    listOpenInbox() {
      return s.read(() => (s.stmt(sql.LIST_OPEN).all() as InboxRow[]).map(toInbox));
    },

    adoptPendingInbox(owner, staleMs, options = {}) {
      return s.tx(() =>
        (
          s
            .stmt(
              `UPDATE inbox SET accepted_by = ?
               WHERE state = 'pending' AND (
                 (? AND (accepted_by IS NULL OR accepted_by = ?))
                 OR (accepted_by <> ? AND NOT EXISTS (
                   SELECT 1 FROM instances i
                     WHERE i.id = inbox.accepted_by AND i.heartbeat_at > ?)))
               RETURNING *`,
            )
            .all(owner, options.includeOwn ? 1 : 0, owner, owner, s.now() - staleMs) as InboxRow[]
        )
          .sort((a, b) => a.id - b.id)
          .map(toInbox),
      );
    },

    closeInboxItem(inboxId, state, notice?) {
      return s.tx(() => {
        s.stmt("UPDATE inbox SET state = ? WHERE id = ?").run(state, inboxId);
        if (state === "cancelled") s.stmt(sql.DROP_ITEM_KEYS).run(inboxId);
        if (notice === undefined) return null;
        const row = s.stmt(sql.SELECT_ITEM).get(inboxId) as InboxRow | undefined;
        if (!row) throw new Error(`unknown inbox item ${inboxId}`);
        const address = JSON.parse(row.address) as ChatAddress;
        const session = ensureSessionSync(s, row.session_key, address);
        return insertOutbox(s, { ...sql.itemNoticeRow(row, session.session_id, notice), inboxId });
      });
    },

    listMediaSteps(inboxId) {
      return s.read(() =>
        sql.toMediaSteps(
          s.stmt(sql.LIST_MEDIA_STEPS).all(inboxId) as { step: string; result: string }[],
        ),
      );
    },

    recordMediaStep(input) {
      return s.tx(() => {
        const { inboxId, step, result, notice } = input;
        const params = [inboxId, step, JSON.stringify(result), s.now()];
        if (s.stmt(sql.RECORD_MEDIA_STEP).run(...params).changes === 0) return false;
        if (notice === undefined) return true;
        const row = s.stmt(sql.SELECT_ITEM).get(inboxId) as InboxRow | undefined;
        if (!row) throw new Error(`unknown inbox item ${inboxId}`);
        insertOutbox(s, sql.itemNoticeRow(row, row.session_id, notice));
        return true;
      });
    },
  };
}
