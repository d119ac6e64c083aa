/**
 * TurnStore (turns and their journal) on SQLite; what each method promises is in roles.ts.
 * Writes run in the group commit (`s.tx`), reads through `s.read`. The statements Postgres runs
 * too are in turns/statements.ts.
 */
import type { ChatMessage } from "../../agent/types.js";
import type { TurnStore } from "../roles.js";
import {
  appendSync,
  checkLease,
  ensureSessionSync,
  insertOutbox,
  type SqliteContext,
} from "../sqlite-shared.js";
import { InboxItemTakenError, type StartTurnInput, type UsageInput } from "../store.js";
import type { CompactionRow, MessageRow, SessionRow, ToolCallRow, TurnRow } from "../store-rows.js";
import { toCompaction, toSession, toStoredMessage, toToolCall, toTurn } from "../store-rows.js";
import * as sql from "./statements.js";

function transcriptSync(s: SqliteContext, sessionId: string, afterSeq: number) {
  return s.transcripts.read(sessionId, afterSeq, (seq) =>
    (s.stmt(sql.SELECT_TRANSCRIPT).all(sessionId, seq) as MessageRow[]).map((row) => ({
      message: toStoredMessage(row),
      chars: row.body.length,
    })),
  );
}

function insertUsage(
  s: SqliteContext,
  sessionId: string,
  turnId: number | null,
  purpose: "turn" | "compaction",
  usage: UsageInput,
): void {
  s.stmt(sql.INSERT_USAGE).run(...sql.usageParams(sessionId, turnId, purpose, usage, s.now()));
}

function latestCompactionSync(s: SqliteContext, sessionId: string): CompactionRow | undefined {
  return s.stmt(sql.LATEST_COMPACTION).get(sessionId) as CompactionRow | undefined;
}

/**
 * A starting turn's session, created if new, with the turn's origin and memory user (each when
 * given) and the time: one statement where the session exists (every turn but its first).
 */
function touchSessionSync(s: SqliteContext, input: StartTurnInput, now: number): SessionRow {
  const touch = () =>
    s
      .stmt(
        `UPDATE sessions SET origin = COALESCE(?, origin), memory_user = COALESCE(?, memory_user),
           updated_at = ?
         WHERE key = ? RETURNING *`,
      )
      .get(
        input.origin ? JSON.stringify(input.origin) : null,
        input.memoryUser || null,
        now,
        input.sessionKey,
      ) as SessionRow | undefined;
  const touched = touch();
  if (touched) return touched;
  ensureSessionSync(s, input.sessionKey, null);
  return touch()!;
}

/** Takes the rest of a backlog (`joined`) for the turn; throws when one is no longer pending. */
function takeJoinedSync(s: SqliteContext, input: StartTurnInput, turnId: number): void {
  const joined = input.joined ?? [];
  if (joined.length === 0) return;
  const take = s.stmt(sql.TAKE_JOINED_INBOX);
  s.stmt(sql.SET_INBOX_TURN).run(turnId, input.inboxId);
  for (const { inboxId } of joined) {
    if (take.run(turnId, inboxId).changes === 0) throw new InboxItemTakenError(inboxId);
  }
}

export function sqliteTurns(s: SqliteContext): TurnStore {
  return {
    loadTranscript(sessionId, afterSeq = 0) {
      return s.read(() => transcriptSync(s, sessionId, afterSeq));
    },

    loadLastMessages(sessionIds) {
      return s.read(() => {
        const last = s.stmt(
          "SELECT body FROM messages WHERE session_id = ? ORDER BY seq DESC LIMIT 1",
        );
        const found = new Map<string, ChatMessage>();
        for (const id of sessionIds) {
          const row = last.get(id) as { body: string } | undefined;
          if (row) found.set(id, JSON.parse(row.body) as ChatMessage);
        }
        return found;
      });
    },

    loadTurnHistory(sessionId) {
      return s.read(() => {
        const row = latestCompactionSync(s, sessionId);
        const compaction = row ? toCompaction(row) : null;
        return {
          compaction,
          messages: transcriptSync(s, sessionId, compaction?.throughSeq ?? 0),
          unfinished: (s.stmt(sql.UNFINISHED_TOOL_CALLS).all(sessionId) as ToolCallRow[]).map(
            toToolCall,
          ),
        };
      });
    },

    appendMessages(sessionId, turnId, messages, closeInboxIds = [], usage?, lease?) {
      return s.tx(() => {
        checkLease(s, lease);
        appendSync(s, sessionId, turnId, messages);
        const close = s.stmt(sql.CLOSE_INBOX);
        for (const id of closeInboxIds) close.run(id);
        if (usage) insertUsage(s, sessionId, turnId, "turn", usage);
      });
    },

    recordCompaction(input) {
      return s.tx(() => {
        sql.checkCompactionAdvances(input, latestCompactionSync(s, input.sessionId));
        const row = s
          .stmt(sql.INSERT_COMPACTION)
          .get(...sql.compactionParams(input, s.now())) as CompactionRow;
        if (input.usage) insertUsage(s, input.sessionId, input.turnId, "compaction", input.usage);
        return toCompaction(row);
      });
    },

    latestCompaction(sessionId) {
      return s.read(() => {
        const row = latestCompactionSync(s, sessionId);
        return row ? toCompaction(row) : null;
      });
    },

    startTurn(input) {
      return s.tx(() => {
        checkLease(s, input.lease);
        if (input.inboxId !== null && s.stmt(sql.TAKE_INBOX).run(input.inboxId).changes === 0) {
          throw new InboxItemTakenError(input.inboxId);
        }
        const now = s.now();
        if (input.lease) {
          // Turns cut off with their gateway (sql.CUT_RUNNING_TURNS says why).
          const cut = s.stmt(sql.CUT_RUNNING_TURNS).all(now, input.sessionKey) as {
            inbox_id: number | null;
          }[];
          for (const t of cut) if (t.inbox_id !== null) s.stmt(sql.CLOSE_INBOX).run(t.inbox_id);
        }
        let session = touchSessionSync(s, input, now);
        if (input.clientTools !== undefined) {
          session = s
            .stmt("UPDATE sessions SET client_tools = ? WHERE key = ? RETURNING *")
            .get(sql.clientToolsValue(input), input.sessionKey) as SessionRow;
        }
        const turn = s
          .stmt(sql.INSERT_TURN)
          .get(input.sessionKey, session.session_id, input.inboxId, now) as TurnRow;
        takeJoinedSync(s, input, turn.id);
        for (const id of input.taskNotes?.ids ?? []) {
          s.stmt("UPDATE tasks SET noted = 1 WHERE id = ?").run(id);
        }
        const inputs = sql.turnInputs(input);
        if (inputs.length > 0) appendSync(s, session.session_id, turn.id, inputs);
        return { ...toTurn(turn), session: toSession(session) };
      }, false);
    },

    finishTurn(input) {
      return s.tx(() => {
        checkLease(s, input.lease);
        const now = s.now();
        const turn = s.stmt(sql.FINISH_TURN).get(input.state, now, input.turnId) as
          | TurnRow
          | undefined;
        if (!turn) throw new Error(`unknown turn ${input.turnId}`);
        if (turn.inbox_id !== null) {
          s.stmt(sql.CLOSE_INBOX).run(turn.inbox_id);
          s.stmt(sql.CLOSE_TURN_INBOX).run(turn.id);
        }
        if (input.finalMessage) appendSync(s, turn.session_id, input.turnId, [input.finalMessage]);
        if (input.usage) insertUsage(s, turn.session_id, input.turnId, "turn", input.usage);
        if (input.state === "done") {
          s.stmt(sql.END_INTERRUPTION).run(now, turn.session_key, turn.session_id);
        }
        const reply = sql.replyRow(turn, input);
        return reply && insertOutbox(s, reply);
      });
    },

    interruptTurns(turns) {
      return s.tx(() => {
        // Every lease first: one that moved on stores nothing.
        for (const t of turns) checkLease(s, t.lease);
        const now = s.now();
        for (const { turnId } of turns) {
          const turn = s
            .stmt(
              "UPDATE turns SET state = 'interrupted', finished_at = ? WHERE id = ? RETURNING *",
            )
            .get(now, turnId) as TurnRow | undefined;
          if (!turn) throw new Error(`unknown turn ${turnId}`);
          if (turn.inbox_id === null) continue;
          s.stmt("UPDATE inbox SET state = 'done' WHERE id = ?").run(turn.inbox_id);
          s.stmt("UPDATE inbox SET state = 'done' WHERE turn_id = ?").run(turn.id);
        }
      });
    },

    listRunningTurns() {
      return s.read(() => (s.stmt(sql.RUNNING_TURNS).all() as TurnRow[]).map(toTurn));
    },

    recordToolStart(input) {
      return s.tx(() => {
        checkLease(s, input.lease);
        s.stmt(sql.RECORD_TOOL_START).run(...sql.toolStartParams(input, s.now()));
      });
    },

    recordToolFinish(input) {
      return s.tx(() => {
        checkLease(s, input.lease);
        const now = s.now();
        const sent = input.sentFile;
        if (sent) {
          s.stmt(sql.INSERT_SENT_FILE).run(...sql.sentFileParams(sent, now));
          const row = insertOutbox(s, sql.sentFileRow(input));
          s.stmt(sql.ATTACH_FILE).run(sent.file.id, row.id);
        }
        s.stmt(sql.RECORD_TOOL_FINISH).run(input.result, now, input.turnId, input.toolCallId);
        appendSync(s, input.sessionId, input.turnId, [sql.toolResultMessage(input)]);
      });
    },

    getSentFile(id) {
      return s.read(() => {
        const row = s.stmt(sql.SELECT_SENT_FILE).get(id) as sql.SentFileRow | undefined;
        return row ? sql.toSentFile(row) : null;
      });
    },
  };
}
