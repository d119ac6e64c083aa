/**
 * StreamStore (stream messages) on Postgres; what each method promises is in roles.ts.
 * Writes run in one transaction each (`s.tx`), reads in one snapshot (`s.read`).
 */
import { all, first, type PgContext } from "../pg-shared.js";
import type { StreamStore } from "../roles.js";
import type { StreamMessage, StreamTurn, TurnState } from "../store.js";
import {
  type LeftoverStreamRow,
  STREAM_RETENTION_MS,
  type StreamMessageRow,
  toStreamMessage,
  toStreamTurns,
} from "../store-rows.js";

export function pgStreams(s: PgContext): StreamStore {
  return {
    saveStreamMessage(input: StreamMessage): Promise<void> {
      return s.tx(async (db) => {
        if (input.piece === 0 && input.state === "open") {
          // A new stream: finished ones older than a week are of no use any more.
          await db.query("DELETE FROM stream_messages WHERE updated_at < $1 AND state != 'open'", [
            s.now() - STREAM_RETENTION_MS,
          ]);
        }
        await db.query(
          `INSERT INTO stream_messages (turn_id, piece, platform, address, message_id, text, state,
               updated_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
             ON CONFLICT (turn_id, piece) DO UPDATE SET address = EXCLUDED.address,
               message_id = EXCLUDED.message_id, text = EXCLUDED.text, state = EXCLUDED.state,
               updated_at = EXCLUDED.updated_at`,
          [
            input.turnId,
            input.piece,
            input.address.platform,
            JSON.stringify(input.address),
            input.messageId,
            input.text,
            input.state,
            s.now(),
          ],
        );
      });
    },

    getStreamTurn(turnId: number): Promise<StreamTurn> {
      return s.read(async (db) => {
        const turn = await first<{ state: TurnState }>(
          db,
          "SELECT state FROM turns WHERE id = $1",
          [turnId],
        );
        const rows = await all<StreamMessageRow>(
          db,
          "SELECT * FROM stream_messages WHERE turn_id = $1 ORDER BY piece",
          [turnId],
        );
        return { turnId, turnState: turn?.state ?? null, messages: rows.map(toStreamMessage) };
      });
    },

    listLeftoverStreams(platform: string): Promise<StreamTurn[]> {
      return s.read(async (db) => {
        const rows = await all<LeftoverStreamRow>(
          db,
          `SELECT s.*, t.state AS turn_state FROM stream_messages s
             LEFT JOIN turns t ON t.id = s.turn_id
             WHERE s.platform = $1 AND s.state = 'open' AND COALESCE(t.state, 'gone') != 'running'
               AND NOT EXISTS (SELECT 1 FROM outbox o
                 WHERE o.turn_id = s.turn_id AND o.state IN ('pending', 'sending'))
             ORDER BY s.turn_id, s.piece`,
          [platform],
        );
        return toStreamTurns(rows);
      });
    },
  };
}
