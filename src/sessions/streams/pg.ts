/**
 * StreamStore (stream messages) on Postgres; what each method promises is in roles.ts.
 * Writes run in one transaction each (`s.tx`), reads in one snapshot (`s.read`). The statements
 * are in streams/statements.ts, shared with SQLite.
 */
import { all, first, type PgContext, pgSql } from "../pg-shared.js";
import type { StreamStore } from "../roles.js";
import type { TurnState } from "../store.js";
import type { LeftoverStreamRow, StreamMessageRow } from "../store-rows.js";
import { STREAM_RETENTION_MS, toStreamMessage, toStreamTurns } from "../store-rows.js";
import * as sql from "./statements.js";

export function pgStreams(s: PgContext): StreamStore {
  return {
    saveStreamMessage(input) {
      return s.tx(async (db) => {
        if (input.piece === 0 && input.state === "open") {
          await db.query(pgSql(sql.DROP_OLD_STREAMS), [s.now() - STREAM_RETENTION_MS]);
        }
        await db.query(pgSql(sql.SAVE_PIECE), sql.pieceParams(input, s.now()));
      });
    },

    getStreamTurn(turnId) {
      return s.read(async (db) => {
        const turn = await first<{ state: TurnState }>(db, pgSql(sql.TURN_STATE), [turnId]);
        const rows = await all<StreamMessageRow>(db, pgSql(sql.TURN_PIECES), [turnId]);
        return { turnId, turnState: turn?.state ?? null, messages: rows.map(toStreamMessage) };
      });
    },

    listLeftoverStreams(platform) {
      return s.read(async (db) =>
        toStreamTurns(await all<LeftoverStreamRow>(db, pgSql(sql.LEFTOVER_STREAMS), [platform])),
      );
    },
  };
}
