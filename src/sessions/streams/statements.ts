/**
 * The stream statements both engines run, written once with SQLite's `?` placeholders
 * (streams/pg.ts converts them with pgSql), and the parameters they take.
 */
import type { StreamMessage } from "../store.js";

/** Finished streams last updated before a time (a new stream clears those older than a week). */
export const DROP_OLD_STREAMS =
  "DELETE FROM stream_messages WHERE updated_at < ? AND state != 'open'";

export const SAVE_PIECE = `INSERT INTO stream_messages (turn_id, piece, platform, address,
    message_id, text, state, updated_at)
  VALUES (?, ?, ?, ?, ?, ?, ?, ?)
  ON CONFLICT (turn_id, piece) DO UPDATE SET address = excluded.address,
    message_id = excluded.message_id, text = excluded.text, state = excluded.state,
    updated_at = excluded.updated_at`;

export function pieceParams(input: StreamMessage, now: number): unknown[] {
  const { turnId, piece, address, messageId, text, state } = input;
  return [turnId, piece, address.platform, JSON.stringify(address), messageId, text, state, now];
}

export const TURN_STATE = "SELECT state FROM turns WHERE id = ?";

export const TURN_PIECES = "SELECT * FROM stream_messages WHERE turn_id = ? ORDER BY piece";

/** Open streams of a platform whose turn is no longer running and whose reply is not queued. */
export const LEFTOVER_STREAMS = `SELECT s.*, t.state AS turn_state FROM stream_messages s
  LEFT JOIN turns t ON t.id = s.turn_id
  WHERE s.platform = ? AND s.state = 'open' AND COALESCE(t.state, 'gone') != 'running'
    AND NOT EXISTS (SELECT 1 FROM outbox o
      WHERE o.turn_id = s.turn_id AND o.state IN ('pending', 'sending'))
  ORDER BY s.turn_id, s.piece`;
