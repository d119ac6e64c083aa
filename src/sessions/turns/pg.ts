/**
 * TurnStore (turns and their journal) on Postgres; what each method promises is in roles.ts.
 * Writes run in one transaction each (`s.tx`), reads in one snapshot (`s.read`).
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
} from "../pg-shared.js";
import type { TurnStore } from "../roles.js";
import type {
  CompactionInput,
  CompactionRecord,
  FinishTurnInput,
  LeaseToken,
  OutboxItem,
  SentFile,
  StartedTurn,
  StartTurnInput,
  StoredMessage,
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

async function transcriptIn(db: Db, sessionId: string, afterSeq: number) {
  return (
    await all<MessageRow>(
      db,
      "SELECT seq, turn_id, body, created_at FROM messages WHERE session_id = $1 AND seq > $2 ORDER BY seq",
      [sessionId, afterSeq],
    )
  ).map(toStoredMessage);
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
    `INSERT INTO model_usage (session_id, turn_id, model, purpose, prompt_tokens,
         completion_tokens, estimated, created_at, chat_key, user_key, task_key, schedule_key)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
    [
      sessionId,
      turnId,
      usage.model,
      purpose,
      Math.round(usage.promptTokens),
      Math.round(usage.completionTokens),
      usage.estimated,
      s.now(),
      usage.scope?.chat ?? null,
      usage.scope?.user ?? null,
      usage.scope?.task ?? null,
      usage.scope?.schedule ?? null,
    ],
  );
}

function latestCompactionRow(db: Db, sessionId: string): Promise<CompactionRow | undefined> {
  return first<CompactionRow>(
    db,
    "SELECT * FROM compactions WHERE session_id = $1 ORDER BY id DESC LIMIT 1",
    [sessionId],
  );
}

export function pgTurns(s: PgContext): TurnStore {
  return {
    loadTranscript(sessionId: string, afterSeq = 0): Promise<StoredMessage[]> {
      return s.read((db) => transcriptIn(db, sessionId, afterSeq));
    },

    loadLastMessages(sessionIds: readonly string[]): Promise<Map<string, ChatMessage>> {
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

    loadTurnHistory(sessionId: string): Promise<TurnHistory> {
      return s.read(async (db) => {
        const row = await latestCompactionRow(db, sessionId);
        const compaction = row ? toCompaction(row) : null;
        return {
          compaction,
          messages: await transcriptIn(db, sessionId, compaction?.throughSeq ?? 0),
          unfinished: (
            await all<ToolCallRow>(
              db,
              "SELECT * FROM tool_calls WHERE session_id = $1 AND state = 'started' ORDER BY id",
              [sessionId],
            )
          ).map(toToolCall),
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
      return s.tx(async (db) => {
        await checkLease(db, lease);
        await appendIn(s, db, sessionId, turnId, messages);
        if (usage) await insertUsage(s, db, sessionId, turnId, "turn", usage);
        if (closeInboxIds.length > 0) {
          await db.query("UPDATE inbox SET state = 'done' WHERE id = ANY($1::bigint[])", [
            closeInboxIds,
          ]);
        }
      });
    },

    recordCompaction(input: CompactionInput): Promise<CompactionRecord> {
      return s.tx(async (db) => {
        // Serialised per transcript: two compactions at once must not both pass the check.
        await db.query("SELECT pg_advisory_xact_lock(hashtext($1))", [
          `keel:compaction:${input.sessionId}`,
        ]);
        const latest = await latestCompactionRow(db, input.sessionId);
        if (latest && input.throughSeq <= latest.through_seq) {
          throw new Error(
            `compaction through message ${input.throughSeq} does not go past the latest one (${latest.through_seq})`,
          );
        }
        const row = await first<CompactionRow>(
          db,
          `INSERT INTO compactions (session_id, turn_id, through_seq, summary, tokens_before,
               tokens_after, created_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING *`,
          [
            input.sessionId,
            input.turnId,
            input.throughSeq,
            input.summary,
            Math.round(input.tokensBefore),
            Math.round(input.tokensAfter),
            s.now(),
          ],
        );
        if (input.usage) {
          await insertUsage(s, db, input.sessionId, input.turnId, "compaction", input.usage);
        }
        return toCompaction(row!);
      });
    },

    latestCompaction(sessionId: string): Promise<CompactionRecord | null> {
      return s.read(async (db) => {
        const row = await latestCompactionRow(db, sessionId);
        return row ? toCompaction(row) : null;
      });
    },

    startTurn(input: StartTurnInput): Promise<StartedTurn> {
      return s.tx(async (db) => {
        await checkLease(db, input.lease);
        const session = await ensureSessionIn(s, db, input.sessionKey, null);
        if (input.inboxId !== null) {
          const taken = await changes(
            db,
            "UPDATE inbox SET state = 'running' WHERE id = $1 AND state = 'pending'",
            [input.inboxId],
          );
          if (taken === 0) throw new InboxItemTakenError(input.inboxId);
        }
        const now = s.now();
        if (input.lease) {
          // Under the session's lease no other turn of it runs: one still marked running was cut
          // off with its gateway, and this turn continues from its record. Left open, a later
          // takeover would mark the session for a resume of what this turn answers.
          const cut = await all<{ inbox_id: number | null }>(
            db,
            `UPDATE turns SET state = 'interrupted', finished_at = $1
               WHERE session_key = $2 AND state = 'running' RETURNING inbox_id`,
            [now, input.sessionKey],
          );
          const inboxIds = cut.flatMap((t) => (t.inbox_id === null ? [] : [t.inbox_id]));
          if (inboxIds.length > 0)
            await db.query("UPDATE inbox SET state = 'done' WHERE id = ANY($1::bigint[])", [
              inboxIds,
            ]);
        }
        const turn = (await first<TurnRow>(
          db,
          `INSERT INTO turns (session_key, session_id, inbox_id, state, started_at)
             VALUES ($1, $2, $3, 'running', $4) RETURNING *`,
          [input.sessionKey, session.session_id, input.inboxId, now],
        ))!;
        const joined = input.joined ?? [];
        if (joined.length > 0) {
          await db.query("UPDATE inbox SET turn_id = $1 WHERE id = $2", [turn.id, input.inboxId]);
          for (const { inboxId } of joined) {
            const taken = await changes(
              db,
              "UPDATE inbox SET state = 'running', turn_id = $1 WHERE id = $2 AND state = 'pending'",
              [turn.id, inboxId],
            );
            if (taken === 0) throw new InboxItemTakenError(inboxId);
          }
        }
        const notes = input.taskNotes;
        if (notes?.ids.length) {
          await db.query("UPDATE tasks SET noted = TRUE WHERE id = ANY($1)", [notes.ids]);
        }
        const inputs = [
          ...(notes?.messages ?? []),
          ...(input.userMessage ? [input.userMessage] : []),
          ...joined.map((j) => j.userMessage),
          ...(input.inputMessages ?? []),
        ];
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
            input.clientTools?.length ? JSON.stringify(input.clientTools) : null,
          ],
        ))!;
        return { ...toTurn(turn), session: toSession(touched) };
      });
    },

    finishTurn(input: FinishTurnInput): Promise<OutboxItem | null> {
      return s.tx(async (db) => {
        await checkLease(db, input.lease);
        const now = s.now();
        const turn = await first<TurnRow>(
          db,
          "UPDATE turns SET state = $1, finished_at = $2 WHERE id = $3 RETURNING *",
          [input.state, now, input.turnId],
        );
        if (!turn) throw new Error(`unknown turn ${input.turnId}`);
        if (turn.inbox_id !== null) {
          await db.query("UPDATE inbox SET state = 'done' WHERE id = $1", [turn.inbox_id]);
          // The rest of a batch (startTurn's `joined`).
          await db.query("UPDATE inbox SET state = 'done' WHERE turn_id = $1", [turn.id]);
        }
        if (input.finalMessage) {
          await appendIn(s, db, turn.session_id, input.turnId, [input.finalMessage]);
        }
        if (input.usage) {
          await insertUsage(s, db, turn.session_id, input.turnId, "turn", input.usage);
        }
        if (input.state === "done") {
          // A finished turn ends the interruption streak and any pending resume.
          await db.query(
            `UPDATE sessions SET interrupt_count = 0, resume_pending = FALSE, resume_reason = NULL,
                 resume_marked_at = NULL, request_notice = NULL, updated_at = $1
               WHERE key = $2 AND session_id = $3`,
            [now, turn.session_key, turn.session_id],
          );
        }
        if (!input.reply) return null;
        return insertOutbox(s, db, {
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

    listRunningTurns(): Promise<TurnRecord[]> {
      return s.read(async (db) =>
        (await all<TurnRow>(db, "SELECT * FROM turns WHERE state = 'running' ORDER BY id")).map(
          toTurn,
        ),
      );
    },

    recordToolStart(input: ToolStartInput): Promise<void> {
      return s.tx(async (db) => {
        await checkLease(db, input.lease);
        await db.query(
          `INSERT INTO tool_calls (tool_call_id, turn_id, session_id, name, arguments, state, started_at)
             VALUES ($1, $2, $3, $4, $5, 'started', $6)
             ON CONFLICT (turn_id, tool_call_id)
               DO UPDATE SET state = 'started', started_at = EXCLUDED.started_at`,
          [input.toolCallId, input.turnId, input.sessionId, input.name, input.arguments, s.now()],
        );
      });
    },

    recordToolFinish(input: ToolFinishInput): Promise<void> {
      return s.tx(async (db) => {
        await checkLease(db, input.lease);
        await db.query(
          `UPDATE tool_calls SET state = 'finished', result = $1, finished_at = $2
             WHERE turn_id = $3 AND tool_call_id = $4 AND state = 'started'`,
          [input.result, s.now(), input.turnId, input.toolCallId],
        );
        await appendIn(s, db, input.sessionId, input.turnId, [
          { role: "tool", tool_call_id: input.toolCallId, content: input.result },
        ]);
        const sent = input.sentFile;
        if (sent) {
          const { file } = sent;
          await db.query(
            `INSERT INTO sent_files (id, session_key, path, name, mime, size, created_at)
               VALUES ($1, $2, $3, $4, $5, $6, $7)`,
            [file.id, sent.sessionKey, file.path, file.name, file.mime, file.size, s.now()],
          );
          const row = await insertOutbox(s, db, {
            sessionKey: sent.sessionKey,
            sessionId: input.sessionId,
            turnId: input.turnId,
            address: sent.address,
            text: sent.caption,
            kind: "reply",
          });
          await db.query("UPDATE outbox SET file_id = $1 WHERE id = $2", [file.id, row.id]);
        }
      });
    },

    getSentFile(id: string): Promise<SentFile | null> {
      return s.read(async (db) => {
        const r = await first<{
          id: string;
          session_key: string;
          path: string;
          name: string;
          mime: string;
          size: number;
          created_at: number;
        }>(db, "SELECT * FROM sent_files WHERE id = $1", [id]);
        if (!r) return null;
        const { session_key, created_at, ...file } = r;
        return { ...file, sessionKey: session_key, createdAt: created_at };
      });
    },
  };
}
