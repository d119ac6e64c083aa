/**
 * TurnStore (turns and their journal) on SQLite; what each method promises is in roles.ts.
 * Writes run in the group commit (`s.tx`), reads through `s.read`.
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
import type {
  CompactionInput,
  CompactionRecord,
  FinishTurnInput,
  LeaseToken,
  OutboxItem,
  SentFile,
  StartedTurn,
  StartTurnInput,
  ToolFinishInput,
  ToolStartInput,
  TurnHistory,
  TurnRecord,
  UsageInput,
} from "../store.js";
import { InboxItemTakenError } from "../store.js";
import {
  type CompactionRow,
  type MessageRow,
  type SessionRow,
  type ToolCallRow,
  type TurnRow,
  toCompaction,
  toSession,
  toStoredMessage,
  toToolCall,
  toTurn,
} from "../store-rows.js";

function transcriptSync(s: SqliteContext, sessionId: string, afterSeq: number) {
  return s.transcripts.read(sessionId, afterSeq, (seq) =>
    (
      s
        .stmt(
          "SELECT seq, turn_id, body, created_at FROM messages WHERE session_id = ? AND seq > ? ORDER BY seq",
        )
        .all(sessionId, seq) as MessageRow[]
    ).map((row) => ({ message: toStoredMessage(row), chars: row.body.length })),
  );
}

function insertUsage(
  s: SqliteContext,
  sessionId: string,
  turnId: number | null,
  purpose: "turn" | "compaction",
  usage: UsageInput,
): void {
  s.stmt(
    `INSERT INTO model_usage (session_id, turn_id, model, purpose, prompt_tokens,
         completion_tokens, estimated, created_at, chat_key, user_key, task_key, schedule_key)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
  ).run(
    sessionId,
    turnId,
    usage.model,
    purpose,
    Math.round(usage.promptTokens),
    Math.round(usage.completionTokens),
    usage.estimated ? 1 : 0,
    s.now(),
    usage.scope?.chat ?? null,
    usage.scope?.user ?? null,
    usage.scope?.task ?? null,
    usage.scope?.schedule ?? null,
  );
}

function latestCompactionSync(s: SqliteContext, sessionId: string): CompactionRow | undefined {
  return s
    .stmt("SELECT * FROM compactions WHERE session_id = ? ORDER BY id DESC LIMIT 1")
    .get(sessionId) as CompactionRow | undefined;
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

function unfinishedToolCallsSync(s: SqliteContext, sessionId: string) {
  return (
    s
      .stmt("SELECT * FROM tool_calls WHERE session_id = ? AND state = 'started' ORDER BY id")
      .all(sessionId) as ToolCallRow[]
  ).map(toToolCall);
}

export function sqliteTurns(s: SqliteContext): TurnStore {
  return {
    loadTranscript(sessionId: string, afterSeq = 0) {
      return s.read(() => transcriptSync(s, sessionId, afterSeq));
    },

    loadLastMessages(sessionIds: readonly string[]): Promise<Map<string, ChatMessage>> {
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

    loadTurnHistory(sessionId: string): Promise<TurnHistory> {
      return s.read(() => {
        const row = latestCompactionSync(s, sessionId);
        const compaction = row ? toCompaction(row) : null;
        return {
          compaction,
          messages: transcriptSync(s, sessionId, compaction?.throughSeq ?? 0),
          unfinished: unfinishedToolCallsSync(s, sessionId),
        };
      });
    },

    appendMessages(
      sessionId: string,
      turnId: number | null,
      messages: ChatMessage[],
      closeInboxIds: number[] = [],
      usage?: UsageInput,
      lease?: LeaseToken,
    ): Promise<void> {
      return s.tx(() => {
        checkLease(s, lease);
        appendSync(s, sessionId, turnId, messages);
        const close = s.stmt("UPDATE inbox SET state = 'done' WHERE id = ?");
        for (const id of closeInboxIds) close.run(id);
        if (usage) insertUsage(s, sessionId, turnId, "turn", usage);
      });
    },

    recordCompaction(input: CompactionInput): Promise<CompactionRecord> {
      return s.tx(() => {
        const latest = latestCompactionSync(s, input.sessionId);
        if (latest && input.throughSeq <= latest.through_seq) {
          throw new Error(
            `compaction through message ${input.throughSeq} does not go past the latest one (${latest.through_seq})`,
          );
        }
        const { lastInsertRowid } = s
          .stmt(
            `INSERT INTO compactions (session_id, turn_id, through_seq, summary, tokens_before,
               tokens_after, created_at)
             VALUES (?, ?, ?, ?, ?, ?, ?)`,
          )
          .run(
            input.sessionId,
            input.turnId,
            input.throughSeq,
            input.summary,
            Math.round(input.tokensBefore),
            Math.round(input.tokensAfter),
            s.now(),
          );
        if (input.usage) insertUsage(s, input.sessionId, input.turnId, "compaction", input.usage);
        return toCompaction(
          s.stmt("SELECT * FROM compactions WHERE id = ?").get(lastInsertRowid) as CompactionRow,
        );
      });
    },

    latestCompaction(sessionId: string): Promise<CompactionRecord | null> {
      return s.read(() => {
        const row = latestCompactionSync(s, sessionId);
        return row ? toCompaction(row) : null;
      });
    },

    startTurn(input: StartTurnInput): Promise<StartedTurn> {
      return s.tx(() => {
        checkLease(s, input.lease);
        if (
          input.inboxId !== null &&
          s
            .stmt("UPDATE inbox SET state = 'running' WHERE id = ? AND state = 'pending'")
            .run(input.inboxId).changes === 0
        ) {
          throw new InboxItemTakenError(input.inboxId);
        }
        const now = s.now();
        // Under the session's lease no other turn of it runs: one still marked running was cut off
        // with its gateway, and this turn continues from its record (turns/pg.ts says why).
        if (input.lease) {
          const cut = s
            .stmt(
              `UPDATE turns SET state = 'interrupted', finished_at = ?
               WHERE session_key = ? AND state = 'running' RETURNING inbox_id`,
            )
            .all(now, input.sessionKey) as { inbox_id: number | null }[];
          for (const t of cut) {
            if (t.inbox_id !== null)
              s.stmt("UPDATE inbox SET state = 'done' WHERE id = ?").run(t.inbox_id);
          }
        }
        let session = touchSessionSync(s, input, now);
        if (input.clientTools !== undefined) {
          session = s
            .stmt("UPDATE sessions SET client_tools = ? WHERE key = ? RETURNING *")
            .get(
              input.clientTools?.length ? JSON.stringify(input.clientTools) : null,
              input.sessionKey,
            ) as SessionRow;
        }
        const turn = s
          .stmt(
            `INSERT INTO turns (session_key, session_id, inbox_id, state, started_at)
             VALUES (?, ?, ?, 'running', ?) RETURNING *`,
          )
          .get(input.sessionKey, session.session_id, input.inboxId, now) as TurnRow;
        const joined = input.joined ?? [];
        if (joined.length > 0) {
          const take = s.stmt(
            "UPDATE inbox SET state = 'running', turn_id = ? WHERE id = ? AND state = 'pending'",
          );
          s.stmt("UPDATE inbox SET turn_id = ? WHERE id = ?").run(turn.id, input.inboxId);
          for (const { inboxId } of joined) {
            if (take.run(turn.id, inboxId).changes === 0) throw new InboxItemTakenError(inboxId);
          }
        }
        const notes = input.taskNotes;
        for (const id of notes?.ids ?? []) {
          s.stmt("UPDATE tasks SET noted = 1 WHERE id = ?").run(id);
        }
        const inputs = [
          ...(notes?.messages ?? []),
          ...(input.userMessage ? [input.userMessage] : []),
          ...joined.map((j) => j.userMessage),
          ...(input.inputMessages ?? []),
        ];
        if (inputs.length > 0) appendSync(s, session.session_id, turn.id, inputs);
        return { ...toTurn(turn), session: toSession(session) };
      }, false);
    },

    finishTurn(input: FinishTurnInput): Promise<OutboxItem | null> {
      return s.tx(() => {
        checkLease(s, input.lease);
        const now = s.now();
        const turn = s
          .stmt("UPDATE turns SET state = ?, finished_at = ? WHERE id = ? RETURNING *")
          .get(input.state, now, input.turnId) as TurnRow | undefined;
        if (!turn) throw new Error(`unknown turn ${input.turnId}`);
        if (turn.inbox_id !== null) {
          s.stmt("UPDATE inbox SET state = 'done' WHERE id = ?").run(turn.inbox_id);
          // The rest of a batch (startTurn's `joined`).
          s.stmt("UPDATE inbox SET state = 'done' WHERE turn_id = ?").run(turn.id);
        }
        if (input.finalMessage) appendSync(s, turn.session_id, input.turnId, [input.finalMessage]);
        if (input.usage) insertUsage(s, turn.session_id, input.turnId, "turn", input.usage);
        if (input.state === "done") {
          // A finished turn ends the interruption streak and any pending resume.
          s.stmt(
            `UPDATE sessions SET interrupt_count = 0, resume_pending = 0, resume_reason = NULL,
                 resume_marked_at = NULL, request_notice = NULL, updated_at = ?
               WHERE key = ? AND session_id = ?`,
          ).run(now, turn.session_key, turn.session_id);
        }
        if (!input.reply) return null;
        return insertOutbox(s, {
          sessionKey: turn.session_key,
          sessionId: turn.session_id,
          turnId: input.turnId,
          address: input.reply.address,
          text: input.reply.text,
          kind: "reply",
          state: input.reply.inBand ? "delivered" : "pending",
          approvalId: input.reply.approvalId,
        });
      });
    },

    interruptTurns(turns: readonly { turnId: number; lease?: LeaseToken }[]): Promise<void> {
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

    listRunningTurns(): Promise<TurnRecord[]> {
      return s.read(() =>
        (s.stmt("SELECT * FROM turns WHERE state = 'running' ORDER BY id").all() as TurnRow[]).map(
          toTurn,
        ),
      );
    },

    recordToolStart(input: ToolStartInput): Promise<void> {
      return s.tx(() => {
        checkLease(s, input.lease);
        s.stmt(
          `INSERT INTO tool_calls (tool_call_id, turn_id, session_id, name, arguments, state, started_at)
             VALUES (?, ?, ?, ?, ?, 'started', ?)
             ON CONFLICT (turn_id, tool_call_id) DO UPDATE SET state = 'started', started_at = excluded.started_at`,
        ).run(
          input.toolCallId,
          input.turnId,
          input.sessionId,
          input.name,
          input.arguments,
          s.now(),
        );
      });
    },

    recordToolFinish(input: ToolFinishInput): Promise<void> {
      return s.tx(() => {
        checkLease(s, input.lease);
        const now = s.now();
        const sent = input.sentFile;
        if (sent) {
          const { file } = sent;
          s.stmt(
            `INSERT INTO sent_files (id, session_key, path, name, mime, size, created_at)
               VALUES (?, ?, ?, ?, ?, ?, ?)`,
          ).run(file.id, sent.sessionKey, file.path, file.name, file.mime, file.size, now);
          const row = insertOutbox(s, {
            sessionKey: sent.sessionKey,
            sessionId: input.sessionId,
            turnId: input.turnId,
            address: sent.address,
            text: sent.caption,
            kind: "reply",
          });
          s.stmt("UPDATE outbox SET file_id = ? WHERE id = ?").run(file.id, row.id);
        }
        s.stmt(
          `UPDATE tool_calls SET state = 'finished', result = ?, finished_at = ?
             WHERE turn_id = ? AND tool_call_id = ? AND state = 'started'`,
        ).run(input.result, now, input.turnId, input.toolCallId);
        appendSync(s, input.sessionId, input.turnId, [
          { role: "tool", tool_call_id: input.toolCallId, content: input.result },
        ]);
      });
    },

    getSentFile(id: string): Promise<SentFile | null> {
      return s.read(() => {
        const r = s.stmt("SELECT * FROM sent_files WHERE id = ?").get(id) as
          | {
              id: string;
              session_key: string;
              path: string;
              name: string;
              mime: string;
              size: number;
              created_at: number;
            }
          | undefined;
        if (!r) return null;
        const { session_key, created_at, ...file } = r;
        return { ...file, sessionKey: session_key, createdAt: created_at };
      });
    },
  };
}
