/**
 * TurnStore (turns and their journal) on Postgres; what each method promises is in roles.ts.
 * Writes run in one transaction each (`s.tx`), reads in one snapshot (`s.read`). The statements
 * SQLite runs too are in turns/statements.ts.
 */

import type { ChatMessage } from "../../agent/types.js";
import {
  all,
  appendIn,
  changes,
  checkLease,
  checkLeases,
  type Db,
  ensureSessionIn,
  first,
  insertOutbox,
  type PgContext,
  pgSql,
} from "../pg-shared.js";
import type { TurnStore } from "../roles.js";
import { InboxItemTakenError, type StartTurnInput, type UsageInput } from "../store.js";
import type { CompactionRow, MessageRow, SessionRow, ToolCallRow, TurnRow } from "../store-rows.js";
import { toCompaction, toSession, toStoredMessage, toToolCall, toTurn } from "../store-rows.js";
import * as sql from "./statements.js";

const CLOSE_INBOX_IDS = "UPDATE inbox SET state = 'done' WHERE id = ANY($1::bigint[])";

async function transcriptIn(db: Db, sessionId: string, afterSeq: number) {
  const rows = await all<MessageRow>(db, pgSql(sql.SELECT_TRANSCRIPT), [sessionId, afterSeq]);
  return rows.map(toStoredMessage);
}

async function insertUsage(
  s: PgContext,
  db: Db,
  sessionId: string,
  turnId: number | null,
  purpose: "turn" | "compaction",
  usage: UsageInput,
): Promise<void> {
  await db.query(
    pgSql(sql.INSERT_USAGE),
    sql.usageParams(sessionId, turnId, purpose, usage, s.now()),
  );
}

function latestCompactionRow(db: Db, sessionId: string): Promise<CompactionRow | undefined> {
  return first<CompactionRow>(db, pgSql(sql.LATEST_COMPACTION), [sessionId]);
}

/** Takes the rest of a backlog (`joined`) for the turn; throws when one is no longer pending. */
async function takeJoined(db: Db, input: StartTurnInput, turnId: number): Promise<void> {
  const joined = input.joined ?? [];
  if (joined.length === 0) return;
  await db.query(pgSql(sql.SET_INBOX_TURN), [turnId, input.inboxId]);
  for (const { inboxId } of joined) {
    const taken = await changes(db, pgSql(sql.TAKE_JOINED_INBOX), [turnId, inboxId]);
    if (taken === 0) throw new InboxItemTakenError(inboxId);
  }
}

export function pgTurns(s: PgContext): TurnStore {
  return {
    loadTranscript(sessionId, afterSeq = 0) {
      return s.read((db) => transcriptIn(db, sessionId, afterSeq));
    },

    loadLastMessages(sessionIds) {
      if (sessionIds.length === 0) return Promise.resolve(new Map());
      return s.read(async (db) => {
        // One index probe per transcript (messages_session), however long the transcript.
        const rows = await all<{ session_id: string; body: string }>(
          db,
          `SELECT ids.id AS session_id, last.body
             FROM unnest($1::text[]) AS ids(id)
             CROSS JOIN LATERAL (
               SELECT body FROM messages WHERE session_id = ids.id ORDER BY seq DESC LIMIT 1
             ) AS last`,
          [[...new Set(sessionIds)]],
        );
        return new Map(rows.map((r) => [r.session_id, JSON.parse(r.body) as ChatMessage]));
      });
    },

    loadTurnHistory(sessionId) {
      return s.read(async (db) => {
        const row = await latestCompactionRow(db, sessionId);
        const compaction = row ? toCompaction(row) : null;
        return {
          compaction,
          messages: await transcriptIn(db, sessionId, compaction?.throughSeq ?? 0),
          unfinished: (
            await all<ToolCallRow>(db, pgSql(sql.UNFINISHED_TOOL_CALLS), [sessionId])
          ).map(toToolCall),
        };
      });
    },

    appendMessages(sessionId, turnId, messages, closeInboxIds = [], usage?, lease?) {
      return s.tx(async (db) => {
        await checkLease(db, lease);
        await appendIn(s, db, sessionId, turnId, messages);
        if (usage) await insertUsage(s, db, sessionId, turnId, "turn", usage);
        if (closeInboxIds.length > 0) await db.query(CLOSE_INBOX_IDS, [closeInboxIds]);
      });
    },

    recordCompaction(input) {
      return s.tx(async (db) => {
        // Serialised per transcript: two compactions at once must not both pass the check.
        await db.query("SELECT pg_advisory_xact_lock(hashtext($1))", [
          `keel:compaction:${input.sessionId}`,
        ]);
        sql.checkCompactionAdvances(input, await latestCompactionRow(db, input.sessionId));
        const row = await first<CompactionRow>(
          db,
          pgSql(sql.INSERT_COMPACTION),
          sql.compactionParams(input, s.now()),
        );
        if (input.usage) {
          await insertUsage(s, db, input.sessionId, input.turnId, "compaction", input.usage);
        }
        return toCompaction(row!);
      });
    },

    latestCompaction(sessionId) {
      return s.read(async (db) => {
        const row = await latestCompactionRow(db, sessionId);
        return row ? toCompaction(row) : null;
      });
    },

    startTurn(input) {
      return s.tx(async (db) => {
        await checkLease(db, input.lease);
        const session = await ensureSessionIn(s, db, input.sessionKey, null);
        if (input.inboxId !== null) {
          const taken = await changes(db, pgSql(sql.TAKE_INBOX), [input.inboxId]);
          if (taken === 0) throw new InboxItemTakenError(input.inboxId);
        }
        const now = s.now();
        if (input.lease) {
          // Turns cut off with their gateway (sql.CUT_RUNNING_TURNS says why).
          const cut = await all<{ inbox_id: number | null }>(db, pgSql(sql.CUT_RUNNING_TURNS), [
            now,
            input.sessionKey,
          ]);
          const inboxIds = cut.flatMap((t) => (t.inbox_id === null ? [] : [t.inbox_id]));
          if (inboxIds.length > 0) await db.query(CLOSE_INBOX_IDS, [inboxIds]);
        }
        const turn = (await first<TurnRow>(db, pgSql(sql.INSERT_TURN), [
          input.sessionKey,
          session.session_id,
          input.inboxId,
          now,
        ]))!;
        await takeJoined(db, input, turn.id);
        const notes = input.taskNotes;
        if (notes?.ids.length) {
          await db.query("UPDATE tasks SET noted = TRUE WHERE id = ANY($1)", [notes.ids]);
        }
        const inputs = sql.turnInputs(input);
        if (inputs.length > 0) await appendIn(s, db, session.session_id, turn.id, inputs);
        const touched = (await first<SessionRow>(
          db,
          `UPDATE sessions SET origin = COALESCE($1, origin), memory_user = COALESCE($2, memory_user),
               updated_at = $3, client_tools = CASE WHEN $5 THEN $6 ELSE client_tools END
             WHERE key = $4 RETURNING *`,
          [
            input.origin ? JSON.stringify(input.origin) : null,
            input.memoryUser || null,
            now,
            input.sessionKey,
            input.clientTools !== undefined,
            sql.clientToolsValue(input),
          ],
        ))!;
        return { ...toTurn(turn), session: toSession(touched) };
      });
    },

    finishTurn(input) {
      return s.tx(async (db) => {
        await checkLease(db, input.lease);
        const now = s.now();
        const turn = await first<TurnRow>(db, pgSql(sql.FINISH_TURN), [
          input.state,
          now,
          input.turnId,
        ]);
        if (!turn) throw new Error(`unknown turn ${input.turnId}`);
        if (turn.inbox_id !== null) {
          await db.query(pgSql(sql.CLOSE_INBOX), [turn.inbox_id]);
          await db.query(pgSql(sql.CLOSE_TURN_INBOX), [turn.id]);
        }
        if (input.finalMessage) {
          await appendIn(s, db, turn.session_id, input.turnId, [input.finalMessage]);
        }
        if (input.usage) {
          await insertUsage(s, db, turn.session_id, input.turnId, "turn", input.usage);
        }
        if (input.state === "done") {
          await db.query(pgSql(sql.END_INTERRUPTION), [now, turn.session_key, turn.session_id]);
        }
        const reply = sql.replyRow(turn, input);
        return reply && insertOutbox(s, db, reply);
      });
    },

    interruptTurns(turns) {
      if (turns.length === 0) return Promise.resolve();
      return s.tx(async (db) => {
        await checkLeases(
          db,
          turns.flatMap((t) => (t.lease ? [t.lease] : [])),
        );
        const ids = [...new Set(turns.map((t) => t.turnId))];
        // Set-wise, one statement each: a thousand cut-off turns are three statements, not 4,000.
        const closed = await all<{ id: number | string; inbox_id: number | string | null }>(
          db,
          `UPDATE turns SET state = 'interrupted', finished_at = $2 WHERE id = ANY($1::bigint[])
             RETURNING id, inbox_id`,
          [ids, s.now()],
        );
        if (closed.length !== ids.length) {
          const found = new Set(closed.map((row) => Number(row.id)));
          throw new Error(`unknown turn ${ids.find((id) => !found.has(id))}`);
        }
        const inboxIds = closed.flatMap((row) => (row.inbox_id === null ? [] : [row.inbox_id]));
        // The items the turns took, and the rest of each batch (startTurn's `joined`).
        await db.query(
          "UPDATE inbox SET state = 'done' WHERE id = ANY($1::bigint[]) OR turn_id = ANY($2::bigint[])",
          [inboxIds, ids],
        );
      });
    },

    listRunningTurns() {
      return s.read(async (db) => (await all<TurnRow>(db, sql.RUNNING_TURNS)).map(toTurn));
    },

    recordToolStart(input) {
      return s.tx(async (db) => {
        await checkLease(db, input.lease);
        await db.query(pgSql(sql.RECORD_TOOL_START), sql.toolStartParams(input, s.now()));
      });
    },

    recordToolFinish(input) {
      return s.tx(async (db) => {
        await checkLease(db, input.lease);
        const now = s.now();
        await db.query(pgSql(sql.RECORD_TOOL_FINISH), [
          input.result,
          now,
          input.turnId,
          input.toolCallId,
        ]);
        await appendIn(s, db, input.sessionId, input.turnId, [sql.toolResultMessage(input)]);
        const sent = input.sentFile;
        if (sent) {
          await db.query(pgSql(sql.INSERT_SENT_FILE), sql.sentFileParams(sent, now));
          const row = await insertOutbox(s, db, sql.sentFileRow(input));
          await db.query(pgSql(sql.ATTACH_FILE), [sent.file.id, row.id]);
        }
      });
    },

    getSentFile(id) {
      return s.read(async (db) => {
        const row = await first<sql.SentFileRow>(db, pgSql(sql.SELECT_SENT_FILE), [id]);
        return row ? sql.toSentFile(row) : null;
      });
    },
  };
}
