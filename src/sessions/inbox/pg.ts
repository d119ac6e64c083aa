/**
 * InboxStore (the inbox) on Postgres; what each method promises is in roles.ts.
 * Writes run in one transaction each (`s.tx`), reads in one snapshot (`s.read`).
 */
import type { ChatAddress, IdempotencyClaim, InboundMessage } from "../../contract/platform.js";
import {
  all,
  appendIn,
  changes,
  DB_NOW,
  type Db,
  ensureSessionIn,
  first,
  insertOutbox,
  moveScheduleCursor,
  type PgContext,
  sessionRow,
} from "../pg-shared.js";
import type { InboxStore } from "../roles.js";
import type {
  AcceptInboundResult,
  IdempotencyRecord,
  InboxAnswer,
  InboxItem,
  MediaStepInput,
  OutboxItem,
  ScheduleAdvance,
} from "../store.js";
import { ScheduleChangedError } from "../store.js";
import { flag, type InboxRow, type TurnRow, toInbox } from "../store-rows.js";

function idempotencyRow(
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

async function hasMessages(db: Db, sessionId: string): Promise<boolean> {
  return (
    (await first(db, "SELECT 1 FROM messages WHERE session_id = $1 LIMIT 1", [sessionId])) !==
    undefined
  );
}

export function pgInbox(s: PgContext): InboxStore {
  return {
    acceptInbound(
      message: InboundMessage,
      advance?: ScheduleAdvance,
    ): Promise<AcceptInboundResult> {
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
        const session = await ensureSessionIn(
          s,
          db,
          message.sessionKey,
          message.address,
          message.credential,
        );
        const inserted = await insertInbox(s, db, message, session.session_id, now);
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
        if (message.history?.length && !(await hasMessages(db, session.session_id))) {
          await appendIn(s, db, session.session_id, null, message.history);
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
    },

    hasOpenInbox(platform: string, chatId: string): Promise<boolean> {
      return s.read(
        async (db) =>
          (await first(
            db,
            `SELECT 1 FROM inbox WHERE platform = $1 AND chat_id = $2
               AND state IN ('pending', 'running') LIMIT 1`,
            [platform, chatId],
          )) !== undefined,
      );
    },

    findIdempotencyKey(scope: string, key: string): Promise<IdempotencyRecord | null> {
      return s.read(async (db) => {
        const row = await idempotencyRow(db, scope, key, s.now());
        return row
          ? { requestHash: row.request_hash, item: toInbox(row), expiresAt: row.expires_at }
          : null;
      });
    },

    findThread(thread: string): Promise<{ sessionKey: string; sessionId: string } | null> {
      return s.read(async (db) => {
        const row = await first<{ session_key: string; session_id: string }>(
          db,
          "SELECT session_key, session_id FROM inbox WHERE thread = $1 ORDER BY id DESC LIMIT 1",
          [thread],
        );
        return row ? { sessionKey: row.session_key, sessionId: row.session_id } : null;
      });
    },

    findInboxAnswer(inboxId: number): Promise<InboxAnswer> {
      return s.read(async (db): Promise<InboxAnswer> => {
        const item = await first<InboxRow>(db, "SELECT * FROM inbox WHERE id = $1", [inboxId]);
        if (!item) return { state: "unrecorded" };
        const open: InboxAnswer = { state: "open", sessionKey: item.session_key };
        if (item.state === "pending" || item.state === "running") return open;
        // A batch's later messages name their turn; its first is the turn's own inbox_id.
        let turn = item.turn_id
          ? await first<TurnRow>(db, "SELECT * FROM turns WHERE id = $1", [item.turn_id])
          : await first<TurnRow>(
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
          const session = await sessionRow(db, turn.session_key);
          const awaitingResume =
            !next && session?.session_id === turn.session_id && flag(session.resume_pending);
          return awaitingResume ? open : { state: "answered", outcome: "interrupted", text: "" };
        }
      });
    },

    listOpenInbox(): Promise<InboxItem[]> {
      return s.read(async (db) =>
        (
          await all<InboxRow>(
            db,
            "SELECT * FROM inbox WHERE state IN ('pending', 'running') ORDER BY id",
          )
        ).map(toInbox),
      );
    },

    adoptPendingInbox(
      owner: string,
      staleMs: number,
      options: { includeOwn?: boolean } = {},
    ): Promise<InboxItem[]> {
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

    closeInboxItem(
      inboxId: number,
      state: "done" | "cancelled",
      notice?: string,
    ): Promise<OutboxItem | null> {
      return s.tx(async (db) => {
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
        const session = await ensureSessionIn(s, db, row.session_key, address);
        return insertOutbox(s, db, {
          sessionKey: row.session_key,
          sessionId: session.session_id,
          turnId: null,
          address,
          text: notice,
          kind: "notice",
          inboxId,
        });
      });
    },

    listMediaSteps(inboxId: number): Promise<Record<string, unknown>> {
      return s.read(async (db) => {
        const rows = await all<{ step: string; result: string }>(
          db,
          "SELECT step, result FROM media_steps WHERE inbox_id = $1",
          [inboxId],
        );
        return Object.fromEntries(rows.map((r) => [r.step, JSON.parse(r.result) as unknown]));
      });
    },

    recordMediaStep(input: MediaStepInput): Promise<boolean> {
      return s.tx(async (db) => {
        const inserted = await changes(
          db,
          `INSERT INTO media_steps (inbox_id, step, result, created_at) VALUES ($1, $2, $3, $4)
             ON CONFLICT (inbox_id, step) DO NOTHING`,
          [input.inboxId, input.step, JSON.stringify(input.result), s.now()],
        );
        if (inserted === 0) return false;
        if (input.notice === undefined) return true;
        const row = await first<InboxRow>(db, "SELECT * FROM inbox WHERE id = $1", [input.inboxId]);
        if (!row) throw new Error(`unknown inbox item ${input.inboxId}`);
        await insertOutbox(s, db, {
          sessionKey: row.session_key,
          sessionId: row.session_id,
          turnId: null,
          address: JSON.parse(row.address) as ChatAddress,
          text: input.notice,
          kind: "notice",
        });
        return true;
      });
    },
  };
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
  await db.query("DELETE FROM idempotency_keys WHERE expires_at <= $1", [now]);
  const seen = await idempotencyRow(db, claim.scope, claim.key, now);
  // Checked before anything is written: a repeat must not even create its session.
  if (!seen) return null;
  return {
    accepted: false,
    item: toInbox(seen),
    ...(seen.request_hash !== claim.requestHash && { idempotencyConflict: true }),
  };
}

/** Inserts the message's inbox row; null when the platform's message is stored already. */
function insertInbox(
  s: PgContext,
  db: Db,
  message: InboundMessage,
  sessionId: string,
  now: number,
): Promise<InboxRow | undefined> {
  return first<InboxRow>(
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
      sessionId,
      message.text,
      message.senderId ?? null,
      message.senderName ?? null,
      JSON.stringify(message.address),
      message.operator === true,
      now,
      message.attachments?.length ? JSON.stringify(message.attachments) : null,
      s.instanceId,
      message.clientTools ? JSON.stringify(message.clientTools) : null,
      message.thread ?? null,
    ],
  );
}
