/**
 * Row shapes of the stores' tables and their mapping to the store's domain types, shared by the
 * SQLite and Postgres implementations: both keep the same columns, times as epoch-ms integers
 * and JSON as text. Flags are 0/1 integers in SQLite and booleans in Postgres; `flag` reads both.
 */
import { contentText } from "../agent/content.js";
import type { ChatMessage } from "../agent/types.js";
import type {
  ChatAddress,
  ClientToolSpec,
  ClientTools,
  InboundAttachment,
} from "../contract/platform.js";
import type {
  ApprovalDecision,
  ApprovalRecord,
  ApprovalState,
  CompactionRecord,
  InboxItem,
  InstanceRecord,
  OutboxItem,
  PairingRequest,
  RecentChat,
  RequestNotice,
  ResumeReason,
  ScheduleJob,
  SessionLease,
  SessionRecord,
  SessionSummary,
  StoredMessage,
  StreamMessage,
  StreamMessageState,
  StreamTurn,
  ToolCallRecord,
  TurnRecord,
  TurnState,
  UsageTotals,
} from "./store.js";

/** A 0/1 integer (SQLite) or a boolean (Postgres). */
export type Flag = number | boolean;

export function flag(value: Flag): boolean {
  return value === true || value === 1;
}

export interface SessionRow {
  key: string;
  session_id: string;
  origin: string | null;
  resume_pending: Flag;
  resume_reason: string | null;
  resume_marked_at: number | null;
  interrupt_count: number;
  suspended: Flag;
  request_notice: string | null;
  model: string | null;
  memory_user: string | null;
  credential: string | null;
  client_tools: string | null;
  created_at: number;
  updated_at: number;
}

export function toSession(r: SessionRow): SessionRecord {
  return {
    key: r.key,
    sessionId: r.session_id,
    origin: r.origin ? (JSON.parse(r.origin) as ChatAddress) : null,
    resumePending: flag(r.resume_pending),
    resumeReason: r.resume_reason as ResumeReason | null,
    resumeMarkedAt: r.resume_marked_at,
    interruptCount: r.interrupt_count,
    suspended: flag(r.suspended),
    requestNotice: r.request_notice as RequestNotice | null,
    model: r.model,
    memoryUser: r.memory_user,
    credential: r.credential,
    clientTools: r.client_tools ? (JSON.parse(r.client_tools) as ClientToolSpec[]) : null,
    createdAt: r.created_at,
    updatedAt: r.updated_at,
  };
}

export interface InboxRow {
  id: number;
  platform: string;
  chat_id: string;
  platform_message_id: string;
  session_key: string;
  session_id: string;
  text: string;
  sender_id: string | null;
  sender_name: string | null;
  address: string;
  state: string;
  received_at: number;
  operator: Flag;
  attachments: string | null;
  /** The turn that took the item as part of a batch (set for every item of a batch). */
  turn_id?: number | null;
  client_tools: string | null;
  thread: string | null;
}

export function toInbox(r: InboxRow): InboxItem {
  return {
    id: r.id,
    platform: r.platform,
    chatId: r.chat_id,
    platformMessageId: r.platform_message_id,
    sessionKey: r.session_key,
    sessionId: r.session_id,
    text: r.text,
    ...(r.sender_id !== null && { senderId: r.sender_id }),
    ...(r.sender_name !== null && { senderName: r.sender_name }),
    address: JSON.parse(r.address) as ChatAddress,
    ...(flag(r.operator) && { operator: true }),
    ...(r.attachments !== null && {
      attachments: JSON.parse(r.attachments) as InboundAttachment[],
    }),
    ...(r.client_tools !== null && { clientTools: JSON.parse(r.client_tools) as ClientTools }),
    ...(r.thread !== null && { thread: r.thread }),
    state: r.state as InboxItem["state"],
    receivedAt: r.received_at,
  };
}

export interface TurnRow {
  id: number;
  session_key: string;
  session_id: string;
  inbox_id: number | null;
  state: string;
  started_at: number;
  finished_at: number | null;
}

export function toTurn(r: TurnRow): TurnRecord {
  return {
    id: r.id,
    sessionKey: r.session_key,
    sessionId: r.session_id,
    inboxId: r.inbox_id,
    state: r.state as TurnRecord["state"],
    startedAt: r.started_at,
    finishedAt: r.finished_at,
  };
}

export interface ToolCallRow {
  tool_call_id: string;
  turn_id: number;
  session_id: string;
  name: string;
  arguments: string;
  state: string;
  result: string | null;
  started_at: number;
  finished_at: number | null;
}

export function toToolCall(r: ToolCallRow): ToolCallRecord {
  return {
    toolCallId: r.tool_call_id,
    turnId: r.turn_id,
    sessionId: r.session_id,
    name: r.name,
    arguments: r.arguments,
    state: r.state as ToolCallRecord["state"],
    result: r.result,
    startedAt: r.started_at,
    finishedAt: r.finished_at,
  };
}

export interface OutboxRow {
  id: number;
  session_key: string;
  session_id: string;
  turn_id: number | null;
  address: string;
  text: string;
  kind: string;
  state: string;
  attempts: number;
  created_at: number;
  delivered_at: number | null;
  file_id?: string | null;
  /** The sent file's columns, when the query joined `sent_files`. */
  file_path?: string | null;
  file_name?: string | null;
  file_mime?: string | null;
  file_size?: number | null;
  approval_id?: string | null;
  queued_by?: string | null;
}

export function toOutbox(r: OutboxRow): OutboxItem {
  const file =
    r.file_id && r.file_path
      ? {
          id: r.file_id,
          path: r.file_path,
          name: r.file_name ?? "file",
          mime: r.file_mime ?? "application/octet-stream",
          size: r.file_size ?? 0,
        }
      : null;
  return {
    id: r.id,
    sessionKey: r.session_key,
    sessionId: r.session_id,
    turnId: r.turn_id,
    address: JSON.parse(r.address) as ChatAddress,
    text: r.text,
    kind: r.kind as OutboxItem["kind"],
    state: r.state as OutboxItem["state"],
    attempts: r.attempts,
    createdAt: r.created_at,
    deliveredAt: r.delivered_at,
    ...(file && { file }),
    ...(r.approval_id && { approvalId: r.approval_id }),
    ...(r.queued_by && { queuedBy: r.queued_by }),
  };
}

/** What a new outbox row is made of (the stores' `insertOutbox`; the rest is the store's). */
export type NewOutboxRow = Pick<
  OutboxItem,
  "sessionKey" | "sessionId" | "turnId" | "address" | "text" | "kind"
> & {
  /** `delivered`: a record of a reply answered in band (FinishTurnInput.reply.inBand). */
  state?: "pending" | "sending" | "delivered";
  /** The inbox item this notice answers (it closed the item without a turn). */
  inboxId?: number | null;
  approvalId?: string | null | undefined;
};

export interface MessageRow {
  seq: number;
  turn_id: number | null;
  body: string;
  created_at: number;
}

export function toStoredMessage(r: MessageRow): StoredMessage {
  const message = JSON.parse(r.body) as ChatMessage;
  return { seq: r.seq, turnId: r.turn_id, message, createdAt: r.created_at };
}

export interface PairingRow {
  code: string;
  platform: string;
  user_id: string;
  user_name: string | null;
  chat_id: string;
  created_at: number;
  expires_at: number;
  approved_at: number | null;
}

export function toPairing(r: PairingRow): PairingRequest {
  return {
    code: r.code,
    platform: r.platform,
    userId: r.user_id,
    userName: r.user_name,
    chatId: r.chat_id,
    createdAt: r.created_at,
    expiresAt: r.expires_at,
    approvedAt: r.approved_at,
  };
}

export interface ScheduleJobRow {
  id: number;
  name: string;
  kind: string;
  expr: string;
  tz: string | null;
  prompt: string;
  session_key: string;
  chat: string | null;
  misfire: string;
  paused: Flag;
  paused_reason: string | null;
  next_fire_at: number | null;
  last_fire_at: number | null;
  last_fired_late_ms: number | null;
  failures: number;
  created_by: string;
  created_at: number;
  updated_at: number;
}

export function toScheduleJob(r: ScheduleJobRow): ScheduleJob {
  return {
    id: r.id,
    name: r.name,
    kind: r.kind as ScheduleJob["kind"],
    expr: r.expr,
    tz: r.tz,
    prompt: r.prompt,
    sessionKey: r.session_key,
    chat: r.chat ? (JSON.parse(r.chat) as ChatAddress) : null,
    misfire: r.misfire as ScheduleJob["misfire"],
    paused: flag(r.paused),
    pausedReason: r.paused_reason,
    nextFireAt: r.next_fire_at,
    lastFireAt: r.last_fire_at,
    lastFiredLateMs: r.last_fired_late_ms,
    failures: r.failures,
    createdBy: r.created_by,
    createdAt: r.created_at,
    updatedAt: r.updated_at,
  };
}

/** A `listSessions` row: the session with its transcript's size and last message. */
export interface SessionSummaryRow {
  key: string;
  session_id: string;
  platform: string | null;
  resume_pending: Flag;
  suspended: Flag;
  updated_at: number;
  message_count: number;
  last_body: string | null;
  first_user_body: string | null;
  sender_name: string | null;
  prompt_tokens: number;
  completion_tokens: number;
}

export function toSessionSummary(r: SessionSummaryRow): SessionSummary {
  const last = r.last_body ? (JSON.parse(r.last_body) as ChatMessage) : null;
  const first = r.first_user_body ? (JSON.parse(r.first_user_body) as ChatMessage) : null;
  return {
    key: r.key,
    sessionId: r.session_id,
    platform: r.platform,
    messageCount: r.message_count,
    lastMessage: last ? summarize(last) : null,
    firstMessage: first ? summarize(first) : null,
    chatName: r.sender_name,
    promptTokens: Number(r.prompt_tokens),
    completionTokens: Number(r.completion_tokens),
    resumePending: flag(r.resume_pending),
    suspended: flag(r.suspended),
    updatedAt: r.updated_at,
  };
}

function summarize(message: ChatMessage): string {
  const content = message.content ?? "";
  const text = typeof content === "string" ? content : contentText(content);
  return text.length > 120 ? `${text.slice(0, 117)}...` : text;
}

export interface InstanceRow {
  id: string;
  host: string;
  pid: number;
  started_at: number;
  heartbeat_at: number;
  /** JSON array of platform names; null when the instance did not say. */
  platforms?: string | null;
  /** Computed by the query, on the store's clock (absent: read at the heartbeat, so 0). */
  heartbeat_age_ms?: number;
}

export function toInstance(r: InstanceRow): InstanceRecord {
  return {
    id: r.id,
    host: r.host,
    pid: r.pid,
    startedAt: r.started_at,
    heartbeatAt: r.heartbeat_at,
    heartbeatAgeMs: Math.max(0, r.heartbeat_age_ms ?? 0),
    ...(r.platforms && { platforms: JSON.parse(r.platforms) as string[] }),
  };
}

export interface SessionLeaseRow {
  session_key: string;
  owner: string;
  fence: number;
  expires_at: number;
}

export function toSessionLease(r: SessionLeaseRow): SessionLease {
  return { sessionKey: r.session_key, owner: r.owner, fence: r.fence, expiresAt: r.expires_at };
}

export interface CompactionRow {
  id: number;
  session_id: string;
  turn_id: number | null;
  through_seq: number;
  summary: string;
  tokens_before: number;
  tokens_after: number;
  created_at: number;
}

export function toCompaction(r: CompactionRow): CompactionRecord {
  return {
    id: r.id,
    sessionId: r.session_id,
    turnId: r.turn_id,
    throughSeq: r.through_seq,
    summary: r.summary,
    tokensBefore: r.tokens_before,
    tokensAfter: r.tokens_after,
    createdAt: r.created_at,
  };
}

export interface StreamMessageRow {
  turn_id: number;
  piece: number;
  platform: string;
  address: string;
  message_id: string;
  text: string;
  state: string;
  updated_at: number;
}

export function toStreamMessage(r: StreamMessageRow): StreamMessage {
  return {
    turnId: r.turn_id,
    piece: r.piece,
    address: JSON.parse(r.address) as ChatAddress,
    messageId: r.message_id,
    text: r.text,
    state: r.state as StreamMessageState,
  };
}

/** A chat's latest inbox row, as `listRecentChats` selects it. */
export interface RecentChatRow {
  chat_id: string;
  platform_message_id: string;
  received_at: number;
}

export function toRecentChat(r: RecentChatRow): RecentChat {
  return { chatId: r.chat_id, lastMessageId: r.platform_message_id, receivedAt: r.received_at };
}

/** A stream message with its turn's state, as `listLeftoverStreams` selects it. */
export type LeftoverStreamRow = StreamMessageRow & { turn_state: TurnState | null };

/** Rows in turn and piece order, grouped by turn. */
export function toStreamTurns(rows: readonly LeftoverStreamRow[]): StreamTurn[] {
  const turns = new Map<number, StreamTurn>();
  for (const row of rows) {
    let turn = turns.get(row.turn_id);
    if (!turn) {
      turn = { turnId: row.turn_id, turnState: row.turn_state, messages: [] };
      turns.set(row.turn_id, turn);
    }
    turn.messages.push(toStreamMessage(row));
  }
  return [...turns.values()];
}

/** How long finished stream messages are kept (a reply's delivery never takes that long). */
export const STREAM_RETENTION_MS = 7 * 24 * 3600 * 1000;

/** The sums over `model_usage` rows both stores select. */
export interface UsageSumsRow {
  calls: number;
  prompt: number;
  completion: number;
  estimated: number;
}

export function toUsageTotals(r: UsageSumsRow, lastPromptTokens: number | null): UsageTotals {
  return {
    calls: r.calls,
    promptTokens: r.prompt,
    completionTokens: r.completion,
    estimatedCalls: r.estimated,
    lastPromptTokens,
  };
}

export interface ApprovalRow {
  id: string;
  session_key: string;
  session_id: string;
  turn_id: number;
  tool_call_id: string;
  tool_name: string;
  summary: string;
  rule: string;
  reason: string;
  address: string | null;
  requester: string | null;
  asker: string | null;
  grants: string | null;
  state: string;
  decision: string | null;
  decided_by: string | null;
  created_at: number;
  deadline_at: number;
  decided_at: number | null;
}

export function toApproval(r: ApprovalRow): ApprovalRecord {
  return {
    id: r.id,
    sessionKey: r.session_key,
    sessionId: r.session_id,
    turnId: r.turn_id,
    toolCallId: r.tool_call_id,
    toolName: r.tool_name,
    summary: r.summary,
    rule: r.rule,
    reason: r.reason,
    address: r.address ? (JSON.parse(r.address) as ChatAddress) : null,
    requester: r.requester,
    asker: r.asker,
    grants: r.grants ? (JSON.parse(r.grants) as string[]) : [],
    state: r.state as ApprovalState,
    decision: r.decision as ApprovalDecision | null,
    decidedBy: r.decided_by,
    createdAt: r.created_at,
    deadlineAt: r.deadline_at,
    decidedAt: r.decided_at,
  };
}

/** The state a decision leaves an approval (and its journal row) in. */
export const APPROVAL_STATE_OF: Record<ApprovalDecision, ApprovalState> = {
  approve: "approved",
  approve_session: "approved",
  deny: "denied",
  superseded: "denied",
  timeout: "expired",
};
