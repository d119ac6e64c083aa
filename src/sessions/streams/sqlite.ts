/**
 * StreamStore (stream messages) on SQLite; what each method promises is in roles.ts.
 * Writes run in the group commit (`s.tx`), reads through `s.read`. The statements are in
 * streams/statements.ts, shared with Postgres.
 */
import type { StreamStore } from "../roles.js";
import type { SqliteContext } from "../sqlite-shared.js";
import type { TurnState } from "../store.js";
import type { LeftoverStreamRow, StreamMessageRow } from "../store-rows.js";
import { STREAM_RETENTION_MS, toStreamMessage, toStreamTurns } from "../store-rows.js";
import * as sql from "./statements.js";

export function sqliteStreams(s: SqliteContext): StreamStore {
  return {
    saveStreamMessage(input) {
      return s.tx(() => {
        if (input.piece === 0 && input.state === "open") {
          s.stmt(sql.DROP_OLD_STREAMS).run(s.now() - STREAM_RETENTION_MS);
        }
        s.stmt(sql.SAVE_PIECE).run(...sql.pieceParams(input, s.now()));
      });
    },

    getStreamTurn(turnId) {
      return s.read(() => {
        const turn = s.stmt(sql.TURN_STATE).get(turnId) as { state: TurnState } | undefined;
        const rows = s.stmt(sql.TURN_PIECES).all(turnId) as StreamMessageRow[];
        return { turnId, turnState: turn?.state ?? null, messages: rows.map(toStreamMessage) };
      });
    },

    listLeftoverStreams(platform) {
      return s.read(() =>
        toStreamTurns(s.stmt(sql.LEFTOVER_STREAMS).all(platform) as LeftoverStreamRow[]),
      );
    },
  };
}
