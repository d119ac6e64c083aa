/**
 * The turn journal's statements that both engines run, written once with SQLite's `?`
 * placeholders (turns/pg.ts converts them with pgSql), and the parameters and records they take
 * and give. Flags are bound as 0/1, which Postgres reads as its booleans.
 */
import type { ChatMessage } from "../../agent/types.js";
import type {
  CompactionInput,
  FinishTurnInput,
  SentFile,
  StartTurnInput,
  ToolFinishInput,
  ToolStartInput,
  UsageInput,
} from "../store.js";
import type { CompactionRow, NewOutboxRow, TurnRow } from "../store-rows.js";

export const SELECT_TRANSCRIPT =
  "SELECT seq, turn_id, body, created_at FROM messages WHERE session_id = ? AND seq > ? ORDER BY seq";

export const LATEST_COMPACTION =
  "SELECT * FROM compactions WHERE session_id = ? ORDER BY id DESC LIMIT 1";

export const UNFINISHED_TOOL_CALLS =
  "SELECT * FROM tool_calls WHERE session_id = ? AND state = 'started' ORDER BY id";

export const RUNNING_TURNS = "SELECT * FROM turns WHERE state = 'running' ORDER BY id";

export const INSERT_USAGE = `INSERT INTO model_usage (session_id, turn_id, model, purpose, prompt_tokens,
    completion_tokens, estimated, created_at, chat_key, user_key, task_key, schedule_key)
  VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`;

export function usageParams(
  sessionId: string,
  turnId: number | null,
  purpose: "turn" | "compaction",
  usage: UsageInput,
  now: number,
): unknown[] {
  const scope = usage.scope;
  return [
    sessionId,
    turnId,
    usage.model,
    purpose,
    Math.round(usage.promptTokens),
    Math.round(usage.completionTokens),
    usage.estimated ? 1 : 0,
    now,
    scope?.chat ?? null,
    scope?.user ?? null,
    scope?.task ?? null,
    scope?.schedule ?? null,
  ];
}

/** A compaction must go past the latest one of its transcript. */
export function checkCompactionAdvances(
  input: CompactionInput,
  latest: CompactionRow | undefined,
): void {
  if (latest && input.throughSeq <= latest.through_seq) {
    throw new Error(
      `compaction through message ${input.throughSeq} does not go past the latest one (${latest.through_seq})`,
    );
  }
}

export const INSERT_COMPACTION = `INSERT INTO compactions (session_id, turn_id, through_seq, summary,
    tokens_before, tokens_after, created_at)
  VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING *`;

export function compactionParams(input: CompactionInput, now: number): unknown[] {
  const { sessionId, turnId, throughSeq, summary } = input;
  const tokens = [Math.round(input.tokensBefore), Math.round(input.tokensAfter)];
  return [sessionId, turnId, throughSeq, summary, ...tokens, now];
}

export const TAKE_INBOX = "UPDATE inbox SET state = 'running' WHERE id = ? AND state = 'pending'";

export const TAKE_JOINED_INBOX =
  "UPDATE inbox SET state = 'running', turn_id = ? WHERE id = ? AND state = 'pending'";

export const SET_INBOX_TURN = "UPDATE inbox SET turn_id = ? WHERE id = ?";

export const CLOSE_INBOX = "UPDATE inbox SET state = 'done' WHERE id = ?";

/** The rest of a batch (startTurn's `joined`). */
export const CLOSE_TURN_INBOX = "UPDATE inbox SET state = 'done' WHERE turn_id = ?";

/**
 * Under the session's lease no other turn of it runs: one still marked running was cut off with
 * its gateway, and the new turn continues from its record. Left open, a later takeover would
 * mark the session for a resume of what the new turn answers.
 */
export const CUT_RUNNING_TURNS = `UPDATE turns SET state = 'interrupted', finished_at = ?
  WHERE session_key = ? AND state = 'running' RETURNING inbox_id`;

export const INSERT_TURN = `INSERT INTO turns (session_key, session_id, inbox_id, state, started_at)
  VALUES (?, ?, ?, 'running', ?) RETURNING *`;

/** A starting turn's input, in transcript order: task results, then the user messages. */
export function turnInputs(input: StartTurnInput): ChatMessage[] {
  return [
    ...(input.taskNotes?.messages ?? []),
    ...(input.userMessage ? [input.userMessage] : []),
    ...(input.joined ?? []).map((j) => j.userMessage),
    ...(input.inputMessages ?? []),
  ];
}

/** The `/v1` client's functions as the session stores them (null: none). */
export function clientToolsValue(input: StartTurnInput): string | null {
  return input.clientTools?.length ? JSON.stringify(input.clientTools) : null;
}

export const FINISH_TURN = "UPDATE turns SET state = ?, finished_at = ? WHERE id = ? RETURNING *";

/** A finished turn ends the interruption streak and any pending resume. */
export const END_INTERRUPTION = `UPDATE sessions SET interrupt_count = 0, resume_pending = FALSE,
    resume_reason = NULL, resume_marked_at = NULL, request_notice = NULL, updated_at = ?
  WHERE key = ? AND session_id = ?`;

/** The outbox row of a finished turn's reply; null without one. */
export function replyRow(turn: TurnRow, input: FinishTurnInput): NewOutboxRow | null {
  const { reply } = input;
  if (!reply) return null;
  return {
    sessionKey: turn.session_key,
    sessionId: turn.session_id,
    turnId: input.turnId,
    address: reply.address,
    text: reply.text,
    kind: "reply",
    state: reply.inBand ? "delivered" : "pending",
    approvalId: reply.approvalId,
  };
}

export const RECORD_TOOL_START = `INSERT INTO tool_calls (tool_call_id, turn_id, session_id, name,
    arguments, state, started_at)
  VALUES (?, ?, ?, ?, ?, 'started', ?)
  ON CONFLICT (turn_id, tool_call_id)
    DO UPDATE SET state = 'started', started_at = excluded.started_at`;

export function toolStartParams(input: ToolStartInput, now: number): unknown[] {
  return [input.toolCallId, input.turnId, input.sessionId, input.name, input.arguments, now];
}

export const RECORD_TOOL_FINISH = `UPDATE tool_calls SET state = 'finished', result = ?, finished_at = ?
  WHERE turn_id = ? AND tool_call_id = ? AND state = 'started'`;

/** A tool's result as the transcript keeps it. */
export function toolResultMessage(input: ToolFinishInput): ChatMessage {
  return { role: "tool", tool_call_id: input.toolCallId, content: input.result };
}

export const INSERT_SENT_FILE = `INSERT INTO sent_files (id, session_key, path, name, mime, size,
    created_at)
  VALUES (?, ?, ?, ?, ?, ?, ?)`;

export function sentFileParams(sent: NonNullable<ToolFinishInput["sentFile"]>, now: number) {
  const { file } = sent;
  return [file.id, sent.sessionKey, file.path, file.name, file.mime, file.size, now];
}

/** The outbox row that sends a file a tool sent (its file attached by ATTACH_FILE). */
export function sentFileRow(input: ToolFinishInput): NewOutboxRow {
  const sent = input.sentFile!;
  return {
    sessionKey: sent.sessionKey,
    sessionId: input.sessionId,
    turnId: input.turnId,
    address: sent.address,
    text: sent.caption,
    kind: "reply",
  };
}

export const ATTACH_FILE = "UPDATE outbox SET file_id = ? WHERE id = ?";

export const SELECT_SENT_FILE = "SELECT * FROM sent_files WHERE id = ?";

export interface SentFileRow {
  id: string;
  session_key: string;
  path: string;
  name: string;
  mime: string;
  size: number;
  created_at: number;
}

export function toSentFile(r: SentFileRow): SentFile {
  const { session_key, created_at, ...file } = r;
  return { ...file, sessionKey: session_key, createdAt: created_at };
}
