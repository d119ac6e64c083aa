/**
 * InboxStore (the inbox) on SQLite; what each method promises is in roles.ts.
 * Writes run in the group commit (`s.tx`), reads through `s.read`.
 */
import type { ChatAddress, InboundMessage } from "../../contract/platform.js";
import type { InboxStore } from "../roles.js";
import {
  appendSync,
  ensureSessionSync,
  insertOutbox,
  moveScheduleCursor,
  type SqliteContext,
  sessionRow,
} from "../sqlite-shared.js";
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
import { type InboxRow, type TurnRow, toInbox } from "../store-rows.js";

/** The live key's row joined with its inbox item. */
function idempotencyRow(
  s: SqliteContext,
  scope: string,
  key: string,
  now: number,
): (InboxRow & { request_hash: string; expires_at: number }) | undefined {
  return s
    .stmt(
      `SELECT i.*, k.request_hash, k.expires_at FROM idempotency_keys k
       JOIN inbox i ON i.id = k.inbox_id
       WHERE k.scope = ? AND k.idempotency_key = ? AND k.expires_at > ?`,
    )
    .get(scope, key, now) as (InboxRow & { request_hash: string; expires_at: number }) | undefined;
}

/** Moves a job's cursor past the slot being fired (or retires a one-shot); part of acceptInbound. */
function advanceScheduleJob(s: SqliteContext, advance: ScheduleAdvance): void {
  if (!moveScheduleCursor(s, advance)) throw new ScheduleChangedError(advance.jobId);
}

function hasMessages(s: SqliteContext, sessionId: string): boolean {
  return s.stmt("SELECT 1 FROM messages WHERE session_id = ? LIMIT 1").get(sessionId) !== undefined;
}

export function sqliteInbox(s: SqliteContext): InboxStore {
  return {
    acceptInbound(
      message: InboundMessage,
      advance?: ScheduleAdvance,
    ): Promise<AcceptInboundResult> {
      return s.tx(() => {
        if (advance) advanceScheduleJob(s, advance);
        const now = s.now();
        const claim = message.idempotency;
        if (claim) {
          s.stmt("DELETE FROM idempotency_keys WHERE expires_at <= ?").run(now);
          const seen = idempotencyRow(s, claim.scope, claim.key, now);
          // Checked before anything is written: a repeat must not even create its session.
          if (seen) {
            return {
              accepted: false,
              item: toInbox(seen),
              ...(seen.request_hash !== claim.requestHash && { idempotencyConflict: true }),
            };
          }
        }
        const session = ensureSessionSync(
          s,
          message.sessionKey,
          message.address,
          message.credential,
        );
        const inserted = s
          .stmt(
            `INSERT INTO inbox (platform, chat_id, platform_message_id, session_key, session_id, text,
               sender_id, sender_name, address, operator, state, received_at, attachments,
               accepted_by, client_tools, thread)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending', ?, ?, ?, ?, ?)
             ON CONFLICT (platform, chat_id, platform_message_id) DO NOTHING`,
          )
          .run(
            message.platform,
            message.chatId,
            message.platformMessageId,
            message.sessionKey,
            session.session_id,
            message.text,
            message.senderId ?? null,
            message.senderName ?? null,
            JSON.stringify(message.address),
            message.operator ? 1 : 0,
            now,
            message.attachments?.length ? JSON.stringify(message.attachments) : null,
            s.instanceId,
            message.clientTools ? JSON.stringify(message.clientTools) : null,
            message.thread ?? null,
          );
        if (inserted.changes === 1) {
          // The origin moves when a turn starts (startTurn), not here: a command such as /restart
          // must not become the message a resumed reply answers.
          s.stmt("UPDATE sessions SET updated_at = ? WHERE key = ?").run(now, message.sessionKey);
          if (message.history?.length && !hasMessages(s, session.session_id)) {
            appendSync(s, session.session_id, null, message.history);
          }
        }
        const row = s
          .stmt(
            "SELECT * FROM inbox WHERE platform = ? AND chat_id = ? AND platform_message_id = ?",
          )
          .get(message.platform, message.chatId, message.platformMessageId) as InboxRow;
        if (claim && inserted.changes === 1) {
          s.stmt(
            `INSERT INTO idempotency_keys
                 (scope, idempotency_key, request_hash, inbox_id, created_at, expires_at)
               VALUES (?, ?, ?, ?, ?, ?)`,
          ).run(claim.scope, claim.key, claim.requestHash, row.id, now, now + claim.ttlMs);
        }
        return { accepted: inserted.changes === 1, item: toInbox(row) };
      });
    },

    hasOpenInbox(platform: string, chatId: string): Promise<boolean> {
      return s.read(
        () =>
          s
            .stmt(
              `SELECT 1 FROM inbox WHERE platform = ? AND chat_id = ? AND state IN ('pending', 'running')
               LIMIT 1`,
            )
            .get(platform, chatId) !== undefined,
      );
    },

    findIdempotencyKey(scope: string, key: string): Promise<IdempotencyRecord | null> {
      return s.read(() => {
        const row = idempotencyRow(s, scope, key, s.now());
        return row
          ? { requestHash: row.request_hash, item: toInbox(row), expiresAt: row.expires_at }
          : null;
      });
    },

    findThread(thread: string): Promise<{ sessionKey: string; sessionId: string } | null> {
      return s.read(() => {
        const row = s
          .stmt(
            "SELECT session_key, session_id FROM inbox WHERE thread = ? ORDER BY id DESC LIMIT 1",
          )
          .get(thread) as { session_key: string; session_id: string } | undefined;
        return row ? { sessionKey: row.session_key, sessionId: row.session_id } : null;
      });
    },

    findInboxAnswer(inboxId: number): Promise<InboxAnswer> {
      return s.read(() => {
        const item = s.stmt("SELECT * FROM inbox WHERE id = ?").get(inboxId) as
          | InboxRow
          | undefined;
        if (!item) return { state: "unrecorded" };
        const open: InboxAnswer = { state: "open", sessionKey: item.session_key };
        if (item.state === "pending" || item.state === "running") return open;
        // A batch's later messages name their turn; its first is the turn's own inbox_id.
        let turn = (
          item.turn_id
            ? s.stmt("SELECT * FROM turns WHERE id = ?").get(item.turn_id)
            : s.stmt("SELECT * FROM turns WHERE inbox_id = ? ORDER BY id LIMIT 1").get(inboxId)
        ) as TurnRow | undefined;
        if (!turn) {
          const notice = s
            .stmt("SELECT text FROM outbox WHERE inbox_id = ? ORDER BY id LIMIT 1")
            .get(inboxId) as { text: string } | undefined;
          return notice
            ? { state: "answered", outcome: "notice", text: notice.text }
            : { state: "unrecorded" };
        }
        // Bounded by the number of turns in the transcript; each step moves to a later turn.
        for (;;) {
          if (turn.state === "running") return open;
          if (turn.state === "done" || turn.state === "failed") {
            const reply = s
              .stmt(
                "SELECT text FROM outbox WHERE turn_id = ? AND kind = 'reply' ORDER BY id LIMIT 1",
              )
              .get(turn.id) as { text: string } | undefined;
            const outcome = turn.state === "done" ? "reply" : "failed";
            return { state: "answered", outcome, text: reply?.text ?? "" };
          }
          // Cut off. The next turn of the same transcript continues it when it brought no new
          // message (a resume after a restart, or a /retry of it); a new message supersedes it.
          const next = s
            .stmt("SELECT * FROM turns WHERE session_id = ? AND id > ? ORDER BY id LIMIT 1")
            .get(turn.session_id, turn.id) as TurnRow | undefined;
          if (next && next.inbox_id === null) {
            turn = next;
            continue;
          }
          const session = sessionRow(s, turn.session_key);
          const awaitingResume =
            !next && session?.session_id === turn.session_id && session.resume_pending === 1;
          return awaitingResume ? open : { state: "answered", outcome: "interrupted", text: "" };
        }
      });
    },

    listOpenInbox(): Promise<InboxItem[]> {
      return s.read(() =>
        (
          s
            .stmt("SELECT * FROM inbox WHERE state IN ('pending', 'running') ORDER BY id")
            .all() as InboxRow[]
        ).map(toInbox),
      );
    },

    adoptPendingInbox(
      owner: string,
      staleMs: number,
      options: { includeOwn?: boolean } = {},
    ): Promise<InboxItem[]> {
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

    closeInboxItem(
      inboxId: number,
      state: "done" | "cancelled",
      notice?: string,
    ): Promise<OutboxItem | null> {
      return s.tx(() => {
        s.stmt("UPDATE inbox SET state = ? WHERE id = ?").run(state, inboxId);
        if (state === "cancelled")
          s.stmt("DELETE FROM idempotency_keys WHERE inbox_id = ?").run(inboxId);
        if (notice === undefined) return null;
        const row = s.stmt("SELECT * FROM inbox WHERE id = ?").get(inboxId) as InboxRow | undefined;
        if (!row) throw new Error(`unknown inbox item ${inboxId}`);
        const session = ensureSessionSync(
          s,
          row.session_key,
          JSON.parse(row.address) as ChatAddress,
        );
        return insertOutbox(s, {
          sessionKey: row.session_key,
          sessionId: session.session_id,
          turnId: null,
          address: JSON.parse(row.address) as ChatAddress,
          text: notice,
          kind: "notice",
          inboxId,
        });
      });
    },

    listMediaSteps(inboxId: number): Promise<Record<string, unknown>> {
      return s.read(() => {
        const rows = s
          .stmt("SELECT step, result FROM media_steps WHERE inbox_id = ?")
          .all(inboxId) as { step: string; result: string }[];
        return Object.fromEntries(rows.map((r) => [r.step, JSON.parse(r.result) as unknown]));
      });
    },

    recordMediaStep(input: MediaStepInput): Promise<boolean> {
      return s.tx(() => {
        const { changes } = s
          .stmt(
            `INSERT INTO media_steps (inbox_id, step, result, created_at) VALUES (?, ?, ?, ?)
             ON CONFLICT (inbox_id, step) DO NOTHING`,
          )
          .run(input.inboxId, input.step, JSON.stringify(input.result), s.now());
        if (changes === 0) return false;
        if (input.notice === undefined) return true;
        const row = s.stmt("SELECT * FROM inbox WHERE id = ?").get(input.inboxId) as
          | InboxRow
          | undefined;
        if (!row) throw new Error(`unknown inbox item ${input.inboxId}`);
        const address = JSON.parse(row.address) as ChatAddress;
        insertOutbox(s, {
          sessionKey: row.session_key,
          sessionId: row.session_id,
          turnId: null,
          address,
          text: input.notice,
          kind: "notice",
        });
        return true;
      });
    },
  };
}
