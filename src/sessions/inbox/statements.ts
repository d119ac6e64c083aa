/**
 * The inbox's statements that both engines run, written once with SQLite's `?` placeholders
 * (inbox/pg.ts converts them with pgSql), their parameters, and the answer lookup both run
 * (read-steps.ts).
 */
import type { ChatAddress, IdempotencyClaim, InboundMessage } from "../../contract/platform.js";
import { lookup, type ReadSteps } from "../read-steps.js";
import type { AcceptInboundResult, InboxAnswer } from "../store.js";
import {
  flag,
  type InboxRow,
  type NewOutboxRow,
  type SessionRow,
  type TurnRow,
  toInbox,
} from "../store-rows.js";

export const SELECT_ITEM = "SELECT * FROM inbox WHERE id = ?";

/** A message's inbox row; none back when the platform's message is stored already. */
export const INSERT_ITEM = `INSERT INTO inbox (platform, chat_id, platform_message_id, session_key,
    session_id, text, sender_id, sender_name, address, operator, state, received_at, attachments,
    accepted_by, client_tools, thread)
  VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending', ?, ?, ?, ?, ?)
  ON CONFLICT (platform, chat_id, platform_message_id) DO NOTHING
  RETURNING *`;

export function itemParams(
  message: InboundMessage,
  sessionId: string,
  now: number,
  acceptedBy: string | null,
): unknown[] {
  const { platform, chatId, platformMessageId, sessionKey, text } = message;
  const attachments = message.attachments?.length ? JSON.stringify(message.attachments) : null;
  const clientTools = message.clientTools ? JSON.stringify(message.clientTools) : null;
  return [
    ...[platform, chatId, platformMessageId, sessionKey, sessionId, text],
    ...[message.senderId ?? null, message.senderName ?? null, JSON.stringify(message.address)],
    ...[message.operator ? 1 : 0, now, attachments, acceptedBy, clientTools],
    message.thread ?? null,
  ];
}

export const SELECT_PLATFORM_MESSAGE =
  "SELECT * FROM inbox WHERE platform = ? AND chat_id = ? AND platform_message_id = ?";

/**
 * A message touches only its session's time: the origin moves when a turn starts (startTurn), as
 * a command such as /restart must not become the message a resumed reply answers.
 */
export const TOUCH_SESSION = "UPDATE sessions SET updated_at = ? WHERE key = ?";

export const HAS_MESSAGES = "SELECT 1 FROM messages WHERE session_id = ? LIMIT 1";

export const DROP_EXPIRED_KEYS = "DELETE FROM idempotency_keys WHERE expires_at <= ?";

/** The live key's row joined with its inbox item. */
export const SELECT_KEY = `SELECT i.*, k.request_hash, k.expires_at FROM idempotency_keys k
  JOIN inbox i ON i.id = k.inbox_id
  WHERE k.scope = ? AND k.idempotency_key = ? AND k.expires_at > ?`;

export type KeyRow = InboxRow & { request_hash: string; expires_at: number };

/** A repeat's answer: its first request's item, a conflict when the request differs. */
export function repeatOf(seen: KeyRow, claim: IdempotencyClaim): AcceptInboundResult {
  return {
    accepted: false,
    item: toInbox(seen),
    ...(seen.request_hash !== claim.requestHash && { idempotencyConflict: true }),
  };
}

export const INSERT_KEY = `INSERT INTO idempotency_keys
    (scope, idempotency_key, request_hash, inbox_id, created_at, expires_at)
  VALUES (?, ?, ?, ?, ?, ?)`;

export function keyParams(claim: IdempotencyClaim, inboxId: number, now: number): unknown[] {
  return [claim.scope, claim.key, claim.requestHash, inboxId, now, now + claim.ttlMs];
}

export const HAS_OPEN = `SELECT 1 FROM inbox WHERE platform = ? AND chat_id = ?
  AND state IN ('pending', 'running') LIMIT 1`;

export const SELECT_THREAD =
  "SELECT session_key, session_id FROM inbox WHERE thread = ? ORDER BY id DESC LIMIT 1";

export const LIST_OPEN = "SELECT * FROM inbox WHERE state IN ('pending', 'running') ORDER BY id";

export const DROP_ITEM_KEYS = "DELETE FROM idempotency_keys WHERE inbox_id = ?";

/** The notice an inbox item's close or media step sends to its chat. */
export function itemNoticeRow(row: InboxRow, sessionId: string, text: string): NewOutboxRow {
  const address = JSON.parse(row.address) as ChatAddress;
  return { sessionKey: row.session_key, sessionId, turnId: null, address, text, kind: "notice" };
}

export const LIST_MEDIA_STEPS = "SELECT step, result FROM media_steps WHERE inbox_id = ?";

export function toMediaSteps(rows: { step: string; result: string }[]): Record<string, unknown> {
  return Object.fromEntries(rows.map((r) => [r.step, JSON.parse(r.result) as unknown]));
}

export const RECORD_MEDIA_STEP = `INSERT INTO media_steps (inbox_id, step, result, created_at)
  VALUES (?, ?, ?, ?)
  ON CONFLICT (inbox_id, step) DO NOTHING`;

/** What became of inbox item `inboxId` (findInboxAnswer). */
export function* answerSteps(inboxId: number): ReadSteps<InboxAnswer> {
  const item = (yield lookup(SELECT_ITEM, inboxId)) as InboxRow | undefined;
  if (!item) return { state: "unrecorded" };
  const open: InboxAnswer = { state: "open", sessionKey: item.session_key };
  if (item.state === "pending" || item.state === "running") return open;
  // A batch's later messages name their turn; its first is the turn's own inbox_id.
  let turn = (yield item.turn_id
    ? lookup("SELECT * FROM turns WHERE id = ?", item.turn_id)
    : lookup("SELECT * FROM turns WHERE inbox_id = ? ORDER BY id LIMIT 1", inboxId)) as
    | TurnRow
    | undefined;
  if (!turn) {
    const notice = (yield lookup(
      "SELECT text FROM outbox WHERE inbox_id = ? ORDER BY id LIMIT 1",
      inboxId,
    )) as { text: string } | undefined;
    return notice
      ? { state: "answered", outcome: "notice", text: notice.text }
      : { state: "unrecorded" };
  }
  // Bounded by the number of turns in the transcript; each step moves to a later turn.
  for (;;) {
    if (turn.state === "running") return open;
    if (turn.state === "done" || turn.state === "failed") {
      const reply = (yield lookup(
        "SELECT text FROM outbox WHERE turn_id = ? AND kind = 'reply' ORDER BY id LIMIT 1",
        turn.id,
      )) as { text: string } | undefined;
      const outcome = turn.state === "done" ? "reply" : "failed";
      return { state: "answered", outcome, text: reply?.text ?? "" };
    }
    // Cut off. The next turn of the same transcript continues it when it brought no new
    // message (a resume after a restart, or a /retry of it); a new message supersedes it.
    const next = (yield lookup(
      "SELECT * FROM turns WHERE session_id = ? AND id > ? ORDER BY id LIMIT 1",
      turn.session_id,
      turn.id,
    )) as TurnRow | undefined;
    if (next && next.inbox_id === null) {
      turn = next;
      continue;
    }
    const session = (yield lookup("SELECT * FROM sessions WHERE key = ?", turn.session_key)) as
      | SessionRow
      | undefined;
    const awaitingResume =
      !next && session?.session_id === turn.session_id && flag(session.resume_pending);
    return awaitingResume ? open : { state: "answered", outcome: "interrupted", text: "" };
  }
}
