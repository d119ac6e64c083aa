/** Row shapes of the SQLite store and their mapping to the store's domain types. */
import type { ChatMessage } from "../agent/types.js";
import type { ChatAddress } from "../platforms/platform.js";
import type {
  InboxItem,
  OutboxItem,
  PairingRequest,
  ResumeReason,
  SessionRecord,
  StoredMessage,
  ToolCallRecord,
  TurnRecord,
} from "./store.js";

export interface SessionRow {
  key: string;
  session_id: string;
  origin: string | null;
  resume_pending: number;
  resume_reason: string | null;
  resume_marked_at: number | null;
  interrupt_count: number;
  suspended: number;
  created_at: number;
  updated_at: number;
}

export function toSession(r: SessionRow): SessionRecord {
  return {
    key: r.key,
    sessionId: r.session_id,
    origin: r.origin ? (JSON.parse(r.origin) as ChatAddress) : null,
    resumePending: r.resume_pending === 1,
    resumeReason: r.resume_reason as ResumeReason | null,
    resumeMarkedAt: r.resume_marked_at,
    interruptCount: r.interrupt_count,
    suspended: r.suspended === 1,
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
}

export function toOutbox(r: OutboxRow): OutboxItem {
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
  };
}

export interface MessageRow {
  seq: number;
  turn_id: number | null;
  body: string;
  created_at: number;
}

export function toStoredMessage(r: MessageRow): StoredMessage {
  return {
    seq: r.seq,
    turnId: r.turn_id,
    message: JSON.parse(r.body) as ChatMessage,
    createdAt: r.created_at,
  };
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
