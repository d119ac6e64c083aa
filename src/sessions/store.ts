/**
 * The store contract: everything durable goes through this interface, one method per
 * transaction. The SQLite implementation is the only one today; a Postgres one will follow, so
 * nothing here may assume SQLite. Times are epoch milliseconds.
 */
import type { ChatMessage } from "../agent/types.js";
import type { ChatAddress, InboundMessage } from "../platforms/platform.js";

export type ResumeReason =
  | "restart_timeout"
  | "shutdown_timeout"
  | "restart_interrupted"
  | "queued_during_stop";

export interface SessionRecord {
  key: string;
  /** The current transcript; `/new` points the key at a fresh one. */
  sessionId: string;
  /** Where the conversation started; resumed replies go here. */
  origin: ChatAddress | null;
  resumePending: boolean;
  resumeReason: ResumeReason | null;
  resumeMarkedAt: number | null;
  /** Restarts in a row that cut off this session's turn; three suspend it. */
  interruptCount: number;
  suspended: boolean;
  createdAt: number;
  updatedAt: number;
}

export type InboxState = "pending" | "running" | "done" | "cancelled";

export interface InboxItem extends InboundMessage {
  id: number;
  sessionId: string;
  state: InboxState;
  receivedAt: number;
}

export type TurnState = "running" | "done" | "interrupted" | "failed";

export interface TurnRecord {
  id: number;
  sessionKey: string;
  sessionId: string;
  /** The inbox message this turn answers; null for a synthetic resume turn. */
  inboxId: number | null;
  state: TurnState;
  startedAt: number;
  finishedAt: number | null;
}

export type ToolCallState = "started" | "finished";

export interface ToolCallRecord {
  toolCallId: string;
  turnId: number;
  sessionId: string;
  name: string;
  arguments: string;
  state: ToolCallState;
  result: string | null;
  startedAt: number;
  finishedAt: number | null;
}

/**
 * `pending` rows are the dispatcher's to send; `sending` rows are being sent directly by their
 * writer (stop notices) and are never picked up later: a stale notice must not arrive late.
 */
export type OutboxState = "pending" | "sending" | "delivered" | "failed";

export interface OutboxItem {
  id: number;
  sessionKey: string;
  sessionId: string;
  turnId: number | null;
  address: ChatAddress;
  text: string;
  kind: "reply" | "notice";
  state: OutboxState;
  attempts: number;
  createdAt: number;
  deliveredAt: number | null;
}

export interface SessionSummary {
  key: string;
  sessionId: string;
  platform: string | null;
  messageCount: number;
  lastMessage: string | null;
  resumePending: boolean;
  suspended: boolean;
  updatedAt: number;
}

export interface StoredMessage {
  seq: number;
  turnId: number | null;
  message: ChatMessage;
  createdAt: number;
}

export interface Store {
  /**
   * Commits an inbound platform message to the inbox (creating the session on first contact).
   * A message already stored (same platform + chat + platform message id) returns
   * `accepted: false` and changes nothing.
   */
  acceptInbound(message: InboundMessage): Promise<{ accepted: boolean; item: InboxItem }>;
  /** Inbox items not yet finished (pending or running), oldest first. */
  listOpenInbox(): Promise<InboxItem[]>;
  /**
   * Marks an inbox item done or cancelled without a turn (commands, refused messages); with
   * `notice`, queues that answer to the item's chat in the same transaction, so a crash can never
   * leave a message closed but unanswered.
   */
  closeInboxItem(
    inboxId: number,
    state: "done" | "cancelled",
    notice?: string,
  ): Promise<OutboxItem | null>;

  getSession(key: string): Promise<SessionRecord | null>;
  getSessionById(sessionId: string): Promise<SessionRecord | null>;
  /** Creates the session row for `key` if it does not exist yet. */
  ensureSession(key: string, origin: ChatAddress | null): Promise<SessionRecord>;
  /** Points `key` at a fresh transcript and clears resume/suspension state; returns the new id. */
  resetSession(key: string): Promise<SessionRecord>;
  listSessions(options?: { limit?: number; platform?: string }): Promise<SessionSummary[]>;

  loadTranscript(sessionId: string): Promise<StoredMessage[]>;
  /** Appends messages to a transcript in one transaction (e.g. a model call's assistant message). */
  appendMessages(
    sessionId: string,
    turnId: number | null,
    messages: ChatMessage[],
    /** Inbox items these messages carry (steered input): closed in the same transaction. */
    closeInboxIds?: number[],
  ): Promise<void>;

  /**
   * Starts a turn: the inbox item (if any) goes to `running`, the turn row is created and the
   * user's text is appended to the transcript, all at once.
   */
  startTurn(input: StartTurnInput): Promise<TurnRecord>;
  /**
   * Ends a turn: turn state, inbox item done, the final assistant message appended and, when
   * there is text for the user, an outbox row queued, all in one transaction.
   */
  finishTurn(input: FinishTurnInput): Promise<OutboxItem | null>;
  /** Turns still `running` (after a crash these are the interrupted ones). */
  listRunningTurns(): Promise<TurnRecord[]>;

  /** Journals a tool call as started, before it runs. */
  recordToolStart(input: ToolStartInput): Promise<void>;
  /** Journals the result and appends the matching tool message to the transcript, atomically. */
  recordToolFinish(input: ToolFinishInput): Promise<void>;
  /** Tool calls of a session that were started and never finished. */
  listUnfinishedToolCalls(sessionId: string): Promise<ToolCallRecord[]>;

  /** Queues a notice or reply outside a turn (lifecycle notices, command answers). */
  enqueueOutbox(input: OutboxInput): Promise<OutboxItem>;
  listPendingOutbox(platform?: string): Promise<OutboxItem[]>;
  markDelivered(outboxId: number): Promise<void>;
  /** Records a failed attempt; after `maxAttempts` the row becomes `failed`. */
  markDeliveryFailed(outboxId: number, maxAttempts: number): Promise<void>;

  /**
   * Marks sessions resume-pending (keeps an existing reason), bumping their interrupt count.
   * Suspended sessions are left alone: suspension wins.
   */
  markResumePending(keys: string[], reason: ResumeReason): Promise<void>;
  clearResumePending(key: string): Promise<void>;
  /** Sessions updated since `sinceMs` that are not resume-pending yet. */
  listSessionsActiveSince(sinceMs: number): Promise<SessionRecord[]>;
  listResumePending(): Promise<SessionRecord[]>;
  setSuspended(key: string, suspended: boolean): Promise<void>;

  /** Creates (or returns the live) pairing code for a user who is not allowed yet. At most
   *  `maxPending` live codes per platform: beyond that returns null. Codes expire after `ttlMs`. */
  requestPairing(input: PairingRequestInput): Promise<PairingRequest | null>;
  listPairingRequests(platform?: string): Promise<PairingRequest[]>;
  /** Approves a live code; returns the request approved, or null for an unknown/expired code. */
  approvePairing(code: string): Promise<PairingRequest | null>;
  isUserApproved(platform: string, userId: string): Promise<boolean>;

  /** Appends a durable event to a named channel (web chat replay); returns its sequence number. */
  appendChannelEvent(channel: string, payload: unknown): Promise<number>;
  /** Events of a channel with a sequence number above `afterSeq`, oldest first. */
  listChannelEvents(
    channel: string,
    afterSeq: number,
    limit?: number,
  ): Promise<{ seq: number; payload: unknown }[]>;

  /** Online copy of the database to `path` (a consistent snapshot while the gateway runs). */
  backup(path: string): Promise<void>;
  close(): Promise<void>;
}

export interface PairingRequest {
  code: string;
  platform: string;
  userId: string;
  userName: string | null;
  chatId: string;
  createdAt: number;
  expiresAt: number;
  approvedAt: number | null;
}

/** Inputs of the store methods that take more than a couple of values. */
export interface StartTurnInput {
  sessionKey: string;
  inboxId: number | null;
  userMessage: ChatMessage | null;
}

export interface FinishTurnInput {
  turnId: number;
  state: Exclude<TurnState, "running">;
  finalMessage: ChatMessage | null;
  reply: { address: ChatAddress; text: string } | null;
}

export interface ToolStartInput {
  toolCallId: string;
  turnId: number;
  sessionId: string;
  name: string;
  arguments: string;
}

export interface ToolFinishInput {
  toolCallId: string;
  sessionId: string;
  turnId: number;
  result: string;
}

export interface OutboxInput {
  sessionKey: string;
  sessionId: string;
  address: ChatAddress;
  text: string;
  kind: "reply" | "notice";
  /** The caller sends it itself right away (state `sending`): the dispatcher never will. */
  direct?: boolean;
}

export interface PairingRequestInput {
  platform: string;
  userId: string;
  userName: string | null;
  chatId: string;
  ttlMs: number;
  maxPending: number;
}
