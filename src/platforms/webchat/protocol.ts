/**
 * The web chat wire protocol (docs/webchat-protocol.md): JSON text frames over `/ws`.
 * Client frames are validated here; server frames are typed here so the adapter and the
 * documentation describe the same shapes.
 */

import type { TurnEvent } from "../../contract/platform.js";
import { cutFileName } from "../../lib/utf8.js";

/** Protocol version announced in the server `hello`. */
export const PROTOCOL_VERSION = 1;

/** Session keys of web chat conversations: `agent:main:webchat:<conversationId>`. */
export const SESSION_KEY_PREFIX = "agent:main:webchat:";

const ID_PATTERN = /^[A-Za-z0-9_-]{1,128}$/;
const MAX_TEXT_CHARS = 100_000;

/** Session key of a conversation. */
export function sessionKeyFor(conversationId: string): string {
  return `${SESSION_KEY_PREFIX}${conversationId}`;
}

/** Conversation id of a web chat session key, or null for any other key. */
export function conversationIdOf(sessionKey: string): string | null {
  if (!sessionKey.startsWith(SESSION_KEY_PREFIX)) return null;
  const id = sessionKey.slice(SESSION_KEY_PREFIX.length);
  return ID_PATTERN.test(id) ? id : null;
}

/** Name of the durable store channel holding a conversation's events. */
export function channelFor(conversationId: string): string {
  return `webchat:${conversationId}`;
}

/** What a running turn publishes for live display (see publishTurnEvent). */
export interface PublishedTurnEvent {
  sessionKey: string;
  sessionId: string;
  event: TurnEvent | { type: "turn_start" } | { type: "turn_end"; stopReason: string };
}

/** A file a page attached to a message: its upload id and what the user picked. */
export interface SentAttachment {
  upload_id: string;
  name: string;
  mime: string;
  size: number;
}

/** Files on one message at most. */
const MAX_ATTACHMENTS = 10;
const UPLOAD_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

function parseAttachments(value: unknown): SentAttachment[] | null {
  if (value === undefined) return [];
  if (!Array.isArray(value) || value.length > MAX_ATTACHMENTS) return null;
  const out: SentAttachment[] = [];
  for (const a of value as Record<string, unknown>[]) {
    if (typeof a !== "object" || a === null) return null;
    const { upload_id, name, mime, size } = a;
    if (typeof upload_id !== "string" || !UPLOAD_ID.test(upload_id)) return null;
    if (typeof name !== "string" || name.length === 0) return null;
    if (typeof mime !== "string" || mime.length > 100) return null;
    if (typeof size !== "number" || !Number.isSafeInteger(size) || size < 0) return null;
    // A long name is cut, not refused: the message and its file still go through.
    out.push({ upload_id, name: cutFileName(name), mime, size });
  }
  return out;
}

/** What the store keeps per durable event (the channel event payload). */
export interface DurablePayload {
  kind: "user" | "reply" | "notice" | "tool" | "approval_answered";
  /** The message; for a tool call, its name; for an answered approval, what its card now says. */
  text: string;
  session_id: string;
  /** The client's id for a user message (lets the sender match it to its pending copy). */
  client_id?: string;
  /** The outbox row of a reply or notice (lets a client drop a redelivered copy). */
  outbox_id?: number;
  /** Files a user message came with (names only; the files went to the agent's workspace). */
  attachments?: { name: string; mime: string }[];
  /** A file the agent sent (`text` is its caption), served at `url` to signed-in pages. */
  file?: { id: string; name: string; mime: string; size: number; url: string };
  /** The approval a reply or notice asks for (the page shows its buttons), or that was answered. */
  approval_id?: string;
  /** A tool call the agent made (kind `tool`), stored when it ended so a reload shows it. */
  tool?: StoredToolCall;
  created_at: number;
}

/** A finished tool call as the web chat keeps it (arguments and output shortened). */
export interface StoredToolCall {
  tool_call_id: string;
  name: string;
  arguments: string;
  /** The end of the output, at most {@link STORED_TOOL_OUTPUT_CHARS} characters. */
  output: string;
  is_error: boolean;
}

/** How much of a tool call's arguments and output the stored event keeps. */
export const STORED_TOOL_ARGUMENT_CHARS = 2_000;
export const STORED_TOOL_OUTPUT_CHARS = 4_000;

export type ClientMessage =
  | { type: "hello"; conversation_id?: string; last_seq?: number }
  | { type: "open"; conversation_id: string; after_seq: number }
  | { type: "close"; conversation_id: string }
  | { type: "new"; conversation_id?: string }
  | { type: "list" }
  | {
      type: "send";
      conversation_id: string;
      client_id: string;
      text: string;
      /** Files uploaded first (`POST /uploads`), by upload id. */
      attachments?: SentAttachment[];
    }
  | { type: "ping" };

/** Live turn events: not stored, no seq; a client that misses them loses nothing durable. */
export type LiveFrame =
  | { type: "turn_start"; conversation_id: string; session_id: string }
  | { type: "delta"; conversation_id: string; session_id: string; text: string }
  | {
      type: "tool_start";
      conversation_id: string;
      session_id: string;
      tool_call_id: string;
      name: string;
      arguments: string;
    }
  | {
      type: "tool_end";
      conversation_id: string;
      session_id: string;
      tool_call_id: string;
      name: string;
      output: string;
      is_error: boolean;
    }
  | { type: "turn_end"; conversation_id: string; session_id: string; stop_reason: string };

export interface ConversationSummary {
  conversation_id: string;
  session_id: string;
  /** The first user message of the conversation (its title), or null when none is stored. */
  title: string | null;
  message_count: number;
  last_message: string | null;
  resume_pending: boolean;
  suspended: boolean;
  updated_at: number;
}

export type ServerMessage =
  | { type: "hello"; protocol: number; server_time: number }
  | ({ type: "event"; conversation_id: string; seq: number } & DurablePayload)
  | { type: "synced"; conversation_id: string; last_seq: number }
  | { type: "created"; conversation_id: string }
  | {
      type: "ack";
      conversation_id: string;
      client_id: string;
      seq: number | null;
      duplicate: boolean;
    }
  | { type: "conversations"; conversations: ConversationSummary[] }
  | { type: "error"; code: string; message: string; client_id?: string; retryable: boolean }
  | { type: "pong" }
  | LiveFrame;

/** Thrown-free parse result: either a valid client message or why it was refused. */
export type ParseResult = { ok: true; message: ClientMessage } | { ok: false; error: string };

function isId(value: unknown): value is string {
  return typeof value === "string" && ID_PATTERN.test(value);
}

function isSeq(value: unknown): value is number {
  return typeof value === "number" && Number.isSafeInteger(value) && value >= 0;
}

/** Validates one client frame (the raw text of a WebSocket message). */
export function parseClientMessage(raw: string): ParseResult {
  let data: unknown;
  try {
    data = JSON.parse(raw);
  } catch {
    return { ok: false, error: "frame is not JSON" };
  }
  if (typeof data !== "object" || data === null)
    return { ok: false, error: "frame is not an object" };
  const m = data as Record<string, unknown>;
  switch (m.type) {
    case "hello": {
      if (m.conversation_id !== undefined && !isId(m.conversation_id))
        return bad("conversation_id");
      if (m.last_seq !== undefined && !isSeq(m.last_seq)) return bad("last_seq");
      return ok({ type: "hello", conversation_id: m.conversation_id, last_seq: m.last_seq });
    }
    case "open": {
      if (!isId(m.conversation_id)) return bad("conversation_id");
      const afterSeq = m.after_seq ?? 0;
      if (!isSeq(afterSeq)) return bad("after_seq");
      return ok({ type: "open", conversation_id: m.conversation_id, after_seq: afterSeq });
    }
    case "close":
      return isId(m.conversation_id)
        ? ok({ type: "close", conversation_id: m.conversation_id })
        : bad("conversation_id");
    case "new":
      if (m.conversation_id !== undefined && !isId(m.conversation_id))
        return bad("conversation_id");
      return ok({ type: "new", conversation_id: m.conversation_id });
    case "list":
      return ok({ type: "list" });
    case "ping":
      return ok({ type: "ping" });
    case "send": {
      if (!isId(m.conversation_id)) return bad("conversation_id");
      if (!isId(m.client_id)) return bad("client_id");
      const attachments = parseAttachments(m.attachments);
      if (attachments === null) return bad("attachments");
      if (typeof m.text !== "string") return bad("text");
      if (m.text.trim() === "" && attachments.length === 0) return bad("text");
      if (m.text.length > MAX_TEXT_CHARS) return { ok: false, error: "text is too long" };
      return ok({
        type: "send",
        conversation_id: m.conversation_id,
        client_id: m.client_id,
        text: m.text,
        ...(attachments.length > 0 && { attachments }),
      });
    }
    default:
      return { ok: false, error: "unknown frame type" };
  }
}

function ok(message: ClientMessage): ParseResult {
  return { ok: true, message };
}

function bad(field: string): ParseResult {
  return { ok: false, error: `missing or invalid ${field}` };
}

/** The wire frame of a published turn event. */
export function toLiveFrame(conversationId: string, e: PublishedTurnEvent): LiveFrame {
  const base = { conversation_id: conversationId, session_id: e.sessionId };
  const event = e.event;
  switch (event.type) {
    case "turn_start":
      return { type: "turn_start", ...base };
    case "turn_end":
      return { type: "turn_end", ...base, stop_reason: event.stopReason };
    case "text_delta":
      return { type: "delta", ...base, text: event.text };
    case "tool_start":
      return {
        type: "tool_start",
        ...base,
        tool_call_id: event.toolCallId,
        name: event.name,
        arguments: event.arguments,
      };
    case "tool_end":
      return {
        type: "tool_end",
        ...base,
        tool_call_id: event.toolCallId,
        name: event.name,
        output: event.output,
        is_error: event.isError,
      };
  }
}

/** The wire frame of a stored channel event (tolerates a malformed payload). */
export function eventFrame(
  conversationId: string,
  seq: number,
  payload: unknown,
): ServerMessage & { type: "event" } {
  const p = (
    typeof payload === "object" && payload !== null ? payload : {}
  ) as Partial<DurablePayload>;
  return {
    type: "event",
    conversation_id: conversationId,
    seq,
    kind: p.kind ?? "notice",
    text: typeof p.text === "string" ? p.text : "",
    session_id: p.session_id ?? "",
    ...(p.client_id !== undefined ? { client_id: p.client_id } : {}),
    ...(p.outbox_id !== undefined ? { outbox_id: p.outbox_id } : {}),
    ...(p.file !== undefined ? { file: p.file } : {}),
    ...(p.attachments !== undefined ? { attachments: p.attachments } : {}),
    ...(typeof p.approval_id === "string" ? { approval_id: p.approval_id } : {}),
    ...(p.tool !== undefined ? { tool: p.tool } : {}),
    created_at: p.created_at ?? 0,
  };
}
