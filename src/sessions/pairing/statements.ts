/**
 * The pairing statements both engines run, written once with SQLite's `?` placeholders
 * (pairing/pg.ts converts them with pgSql), and the parameters they take. An optional platform
 * filter is bound twice: `CAST(? AS TEXT) IS NULL OR platform = ?`.
 */
import type { ChatAddress } from "../../contract/platform.js";
import { noticeSessionKey } from "../session-id.js";
import type { PairingRequestInput } from "../store.js";
import type { NewOutboxRow, PairingRow } from "../store-rows.js";

/** A platform's live codes, oldest first. */
export const LIVE_CODES = `SELECT * FROM pairing
  WHERE platform = ? AND approved_at IS NULL AND expires_at > ? ORDER BY created_at`;

export const INSERT_CODE = `INSERT INTO pairing (code, platform, user_id, user_name, chat_id,
    created_at, expires_at)
  VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING *`;

export function codeParams(code: string, input: PairingRequestInput, now: number): unknown[] {
  const { platform, userId, userName, chatId } = input;
  return [code, platform, userId, userName, chatId, now, now + input.ttlMs];
}

export const LIST_REQUESTS = `SELECT * FROM pairing WHERE approved_at IS NULL AND expires_at > ?
    AND (CAST(? AS TEXT) IS NULL OR platform = ?)
  ORDER BY created_at`;

/** Approves a live code (given upper-cased) at a time: [now, code, now]. */
export const APPROVE = `UPDATE pairing SET approved_at = ?
  WHERE code = ? AND approved_at IS NULL AND expires_at > ? RETURNING *`;

/** Where an approval's notice goes: the user's chat, in that chat's notice session. */
export function approvalNotice(row: PairingRow): { sessionKey: string; address: ChatAddress } {
  const address: ChatAddress = { platform: row.platform, chatId: row.chat_id };
  return { sessionKey: noticeSessionKey(address), address };
}

export function approvalNoticeRow(
  target: { sessionKey: string; address: ChatAddress },
  sessionId: string,
  text: string,
): NewOutboxRow {
  return { ...target, sessionId, turnId: null, text, kind: "notice" };
}

/** Each user's latest approval. */
export const APPROVED_USERS = `SELECT * FROM pairing p WHERE approved_at IS NOT NULL
    AND (CAST(? AS TEXT) IS NULL OR platform = ?)
    AND approved_at = (SELECT MAX(approved_at) FROM pairing q
                        WHERE q.platform = p.platform AND q.user_id = p.user_id)
  ORDER BY approved_at`;

export const REVOKE =
  "DELETE FROM pairing WHERE platform = ? AND user_id = ? AND approved_at IS NOT NULL";

export const IS_APPROVED =
  "SELECT 1 FROM pairing WHERE platform = ? AND user_id = ? AND approved_at IS NOT NULL LIMIT 1";
