/**
 * StreamStore (stream messages) on SQLite; what each method promises is in roles.ts.
 * Writes run in the group commit (`s.tx`), reads through `s.read`.
 */
import type { StreamStore } from "../roles.js";
import type { SqliteContext } from "../sqlite-shared.js";
import type { StreamMessage, StreamTurn, TurnState } from "../store.js";
import {
  type LeftoverStreamRow,
  STREAM_RETENTION_MS,
  type StreamMessageRow,
  toStreamMessage,
  toStreamTurns,
} from "../store-rows.js";

export function sqliteStreams(s: SqliteContext): StreamStore {
  return {
    saveStreamMessage(input: StreamMessage): Promise<void> {
      return s.tx(() => {
        if (input.piece === 0 && input.state === "open") {
          // A new stream: finished ones older than a week are of no use any more.
          s.stmt("DELETE FROM stream_messages WHERE updated_at < ? AND state != 'open'").run(
            s.now() - STREAM_RETENTION_MS,
          );
        }
        s.stmt(
          `INSERT INTO stream_messages (turn_id, piece, platform, address, message_id, text, state,
               updated_at)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?)
             ON CONFLICT (turn_id, piece) DO UPDATE SET address = excluded.address,
               message_id = excluded.message_id, text = excluded.text, state = excluded.state,
               updated_at = excluded.updated_at`,
        ).run(
          input.turnId,
          input.piece,
          input.address.platform,
          JSON.stringify(input.address),
          input.messageId,
          input.text,
          input.state,
          s.now(),
        );
      });
    },

    getStreamTurn(turnId: number): Promise<StreamTurn> {
      return s.read(() => {
        const turn = s.stmt("SELECT state FROM turns WHERE id = ?").get(turnId) as
          | { state: TurnState }
          | undefined;
        const rows = s
          .stmt("SELECT * FROM stream_messages WHERE turn_id = ? ORDER BY piece")
          .all(turnId) as StreamMessageRow[];
        return { turnId, turnState: turn?.state ?? null, messages: rows.map(toStreamMessage) };
      });
    },

    listLeftoverStreams(platform: string): Promise<StreamTurn[]> {
      return s.read(() => {
        const rows = s
          .stmt(
            `SELECT s.*, t.state AS turn_state FROM stream_messages s
             LEFT JOIN turns t ON t.id = s.turn_id
             WHERE s.platform = ? AND s.state = 'open' AND COALESCE(t.state, 'gone') != 'running'
               AND NOT EXISTS (SELECT 1 FROM outbox o
                 WHERE o.turn_id = s.turn_id AND o.state IN ('pending', 'sending'))
             ORDER BY s.turn_id, s.piece`,
          )
          .all(platform) as LeftoverStreamRow[];
        return toStreamTurns(rows);
      });
    },
  };
}
