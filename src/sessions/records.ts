/**
 * The records the store keeps and the inputs of its methods: the vocabulary of the store roles
 * (roles.ts). Times are epoch milliseconds.
 */
import type { ChatMessage } from "../agent/types.js";
import type {
  ChatAddress,
  ClientToolSpec,
  InboundMessage,
  OutboundFile,
} from "../contract/platform.js";
import type { UsageScope } from "./budget-records.js";

export type ResumeReason =
  | "restart_timeout"
  | "shutdown_timeout"
  | "restart_interrupted"
  | "queued_during_stop";

/**
 * A notice about a session's unanswered request: `held_back` (the restart-loop breaker holds its
 * resume back until the gateway is stable) or `dropped` (the session was suspended).
 */
export type RequestNotice = "held_back" | "dropped";

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
  /** The notice already given about the unanswered request (cleared when a turn answers). */
  requestNotice: RequestNotice | null;
  /** The model chosen with `/model` (null: the configured main model). */
  model: string | null;
  /** Whose memory file (`<platform>-<user id>`) its turns use: the sender of its latest message. */
  memoryUser: string | null;
  /**
   * The credential the session was created under (`InboundMessage.credential`), never changed
   * afterwards; null for chat platforms' sessions and those stored before it was recorded.
   */
  credential: string | null;
  /** The functions a `/v1` client offered with its latest message (offered again on a resume). */
  clientTools: ClientToolSpec[] | null;
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

/** `awaiting_approval` waits for a human; the decision moves it to `approved`/`denied`/`expired`. */
export type ToolCallState =
  | "started"
  | "finished"
  | "awaiting_approval"
  | "approved"
  | "denied"
  | "expired";

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

/** What waits in the store's queues (the `/metrics` gauges). */
export interface StoreBacklog {
  /** Inbox items accepted and not started yet. */
  inboxPending: number;
  /** Replies and notices waiting for the dispatcher. */
  outboxPending: number;
  /** When the oldest of those was queued (epoch ms), or null when there is none. */
  outboxOldestAt: number | null;
  approvalsPending: number;
  /** Turns a used-up budget holds until an operator answers. */
  budgetPausesPending: number;
}

/** Called with each write transaction's duration in seconds (the commit-duration histogram). */
export type CommitObserver = (seconds: number) => void;

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
  /** A file this row sends (`text` is its caption). */
  file?: OutboundFile;
  /** The approval this message asks for (chat platforms show buttons). */
  approvalId?: string;
  /**
   * Several gateways: the one that queued the row (its store's instance id). While it lives it
   * sends the row itself: a turn's reply finishes the preview that gateway is streaming.
   */
  queuedBy?: string;
}

export interface SessionSummary {
  key: string;
  sessionId: string;
  platform: string | null;
  messageCount: number;
  lastMessage: string | null;
  /** The transcript's first user message, shortened (what the conversation is about). */
  firstMessage: string | null;
  /** Who the chat is with: the latest sender name its chat gave, when a message carried one. */
  chatName: string | null;
  /** Tokens of the transcript's model calls. */
  promptTokens: number;
  completionTokens: number;
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

export interface InstanceInput {
  id: string;
  host: string;
  pid: number;
  startedAt: number;
  /**
   * The platforms it delivers to (its outbox dispatcher's adapters). Absent: not said (a gateway
   * of an earlier version), taken as every platform.
   */
  platforms?: string[];
}

export interface InstanceRecord extends InstanceInput {
  /** When it last said it is alive (the store's clock: the database's, on Postgres). */
  heartbeatAt: number;
  /**
   * How long ago that was when read, on the same clock (so no instance's own clock, which may
   * be off, decides whether another one is alive).
   */
  heartbeatAgeMs: number;
}

/** What a fenced write carries: the lease it was made under. */
export interface LeaseToken {
  sessionKey: string;
  owner: string;
  fence: number;
}

export interface SessionLease extends LeaseToken {
  expiresAt: number;
}

/** A fenced write whose lease moved on to another owner: nothing of it was stored. */
export class LeaseLostError extends Error {
  constructor(sessionKey: string) {
    super(`the lease on session ${sessionKey} moved to another instance; this write was refused`);
  }
}

/** startTurn for an inbox item another turn already took: nothing was stored. */
export class InboxItemTakenError extends Error {
  constructor(inboxId: number) {
    super(`inbox item ${inboxId} was already taken by another turn`);
  }
}

/**
 * `open`: shows the reply as it streams; `final`: shows (a piece of) the delivered reply;
 * `interrupted`: says it was cut off; `deleted`: removed (the final reply needed fewer pieces).
 */
export type StreamMessageState = "open" | "final" | "interrupted" | "deleted";

/** A platform message that shows a piece of a turn's reply. */
export interface StreamMessage {
  turnId: number;
  piece: number;
  address: ChatAddress;
  messageId: string;
  /** What the message shows (written before the edit that shows it). */
  text: string;
  state: StreamMessageState;
}

export interface StreamTurn {
  turnId: number;
  turnState: TurnState | null;
  messages: StreamMessage[];
}

export interface RecentChat {
  chatId: string;
  /** The platform message id of the chat's latest stored message. */
  lastMessageId: string;
  receivedAt: number;
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

export interface AcceptInboundResult {
  accepted: boolean;
  item: InboxItem;
  /** The idempotency key was first used for a different request (nothing was stored). */
  idempotencyConflict?: boolean;
}

export interface IdempotencyRecord {
  requestHash: string;
  item: InboxItem;
  expiresAt: number;
}

/** How an inbox item was answered (see `Store.findInboxAnswer`). */
export type InboxAnswer =
  | { state: "open"; sessionKey: string }
  | {
      state: "answered";
      /** `reply`: a turn finished; `failed`: it ended in an error; `interrupted`: cut off and
       *  superseded (a `/stop`, a newer message, `/new`) or never continued; `notice`: no turn. */
      outcome: "reply" | "failed" | "interrupted" | "notice";
      text: string;
    }
  /** Closed, but the record does not say by what (e.g. taken into another turn as steered input). */
  | { state: "unrecorded" };

/** A turn just started, with its session as the start left it (origin, memory user). */
export interface StartedTurn extends TurnRecord {
  session: SessionRecord;
}

/** See Store.loadTurnHistory. */
export interface TurnHistory {
  compaction: CompactionRecord | null;
  /** The messages after the compaction (all of them without one), in order. */
  messages: StoredMessage[];
  /** Started and never finished (cut off by a crash), in the order they started. */
  unfinished: ToolCallRecord[];
}

/** Inputs of the store methods that take more than a couple of values. */
export interface StartTurnInput {
  sessionKey: string;
  inboxId: number | null;
  userMessage: ChatMessage | null;
  /** The address this turn answers; null keeps the origin (a resume continues the same request). */
  origin?: ChatAddress | null;
  /** With several instances: the session's lease; the write fails when it moved on. */
  lease?: LeaseToken;
  /** Whose memory file the session's turns use from now on; null or absent keeps it. */
  memoryUser?: string | null;
  /**
   * More waiting messages this turn answers together with `inboxId` (a backlog taken as one
   * turn), in order: each is taken like `inboxId` (InboxItemTakenError when one is no longer
   * pending) and its user message appended after `userMessage`; all close when the turn ends.
   */
  joined?: { inboxId: number; userMessage: ChatMessage }[];
  /**
   * Input after the user messages, in the same transaction: the results of a `/v1` client's
   * calls, which the turn continues from.
   */
  inputMessages?: ChatMessage[];
  /**
   * Background tasks whose ended results go into the transcript before the user message, in the
   * same transaction that marks them noted (so each is recorded in its parent once).
   */
  taskNotes?: { ids: number[]; messages: ChatMessage[] };
  /** The `/v1` client's functions, recorded on the session (null: none); absent keeps them. */
  clientTools?: ClientToolSpec[] | null;
}

export interface FinishTurnInput {
  turnId: number;
  state: Exclude<TurnState, "running">;
  finalMessage: ChatMessage | null;
  /**
   * `approvalId`: the reply asks for that approval (chat platforms add buttons). `inBand`: the
   * reply reaches its chat through the turn's own events (the API's HTTP answer), so its outbox
   * row is a record, stored delivered, which the outbox never sends.
   */
  reply: { address: ChatAddress; text: string; approvalId?: string; inBand?: boolean } | null;
  lease?: LeaseToken;
  /** Tokens of the model call that wrote `finalMessage`. */
  usage?: UsageInput;
}

/** Tokens of one model call. */
export interface UsageInput {
  model: string;
  promptTokens: number;
  completionTokens: number;
  /** The endpoint reported none: these are Keel's estimate. */
  estimated: boolean;
  /** Whose spend the call counts for (budgets); absent: only the global total. */
  scope?: UsageScope;
}

export interface UsageTotals {
  calls: number;
  promptTokens: number;
  completionTokens: number;
  /** Calls whose numbers are estimates. */
  estimatedCalls: number;
  /** Prompt size of the latest call (how full the context was), or null before any. */
  lastPromptTokens: number | null;
}

export interface CompactionInput {
  sessionId: string;
  turnId: number | null;
  throughSeq: number;
  summary: string;
  tokensBefore: number;
  tokensAfter: number;
  usage: UsageInput | null;
}

export interface CompactionRecord extends Omit<CompactionInput, "usage"> {
  id: number;
  createdAt: number;
}

export interface ToolStartInput {
  toolCallId: string;
  turnId: number;
  sessionId: string;
  name: string;
  arguments: string;
  lease?: LeaseToken;
}

export interface ToolFinishInput {
  toolCallId: string;
  sessionId: string;
  turnId: number;
  result: string;
  lease?: LeaseToken;
  /**
   * A file the tool sent (`send_file`): stored and queued to `address` in the same transaction
   * as the result, so it goes out exactly once whatever crashes follow.
   */
  sentFile?: { file: OutboundFile; caption: string; sessionKey: string; address: ChatAddress };
}

export interface OnceNoticeInput {
  sessionKey: string;
  sessionId: string;
  name: string;
  address: ChatAddress;
  text: string;
}

export interface MediaStepInput {
  inboxId: number;
  step: string;
  result: unknown;
  notice?: string;
}

export interface SentFile extends OutboundFile {
  sessionKey: string;
  createdAt: number;
}

export interface OutboxInput {
  sessionKey: string;
  sessionId: string;
  address: ChatAddress;
  text: string;
  kind: "reply" | "notice";
  /** The caller sends it itself right away (state `sending`): the dispatcher never will. */
  direct?: boolean;
  /** The approval this message asks for (chat platforms add buttons). */
  approvalId?: string;
}

export interface RequestNoticeInput {
  sessionKey: string;
  notice: RequestNotice;
  address: ChatAddress;
  text: string;
}

export interface PairingRequestInput {
  platform: string;
  userId: string;
  userName: string | null;
  chatId: string;
  ttlMs: number;
  maxPending: number;
}

export type ScheduleKind = "cron" | "every" | "at";
export type MisfirePolicy = "once" | "skip" | "all";

/** A scheduled job as stored; its meaning (next-fire rules) belongs to src/schedules. */
export interface ScheduleJob {
  id: number;
  name: string;
  kind: ScheduleKind;
  /** The cron expression, the interval as written (`15m`), or the one-shot time (ISO). */
  expr: string;
  /** Time zone of a cron expression; null means UTC. */
  tz: string | null;
  prompt: string;
  /** The session its runs happen in. */
  sessionKey: string;
  /** Where its output goes; null: it stays in the job's session. */
  chat: ChatAddress | null;
  misfire: MisfirePolicy;
  paused: boolean;
  pausedReason: string | null;
  /** The next slot to fire (epoch ms); null once a one-shot has fired. */
  nextFireAt: number | null;
  /** The slot fired last, and how late that fire was. */
  lastFireAt: number | null;
  lastFiredLateMs: number | null;
  /** Failed runs in a row. */
  failures: number;
  /** `cli`, `agent` or `chat`. */
  createdBy: string;
  createdAt: number;
  updatedAt: number;
}

/** What a new job is made of; the store fills in the rest. */
export type ScheduleJobInput = Pick<
  ScheduleJob,
  | "name"
  | "kind"
  | "expr"
  | "tz"
  | "prompt"
  | "sessionKey"
  | "chat"
  | "misfire"
  | "nextFireAt"
  | "createdBy"
>;

/** Moves a job's cursor together with the inbox row of its fire. */
export interface ScheduleAdvance {
  jobId: number;
  /** The cursor the caller planned from: the advance applies only if it is still current. */
  expectedNextFireAt: number;
  /** The slot this fire is for, and how late it fires. */
  firedSlot: number;
  lateMs: number;
  /** The new cursor; null retires the job (a one-shot is gone once it fired). */
  nextFireAt: number | null;
}

export class ScheduleChangedError extends Error {
  constructor(jobId: number) {
    super(`scheduled job ${jobId} changed or was removed before it fired`);
  }
}

export class ScheduleNameTakenError extends Error {
  constructor(name: string) {
    super(`A schedule named "${name}" already exists.`);
  }
}

export type ApprovalState = "pending" | "approved" | "denied" | "expired";

/** Which approvals `listApprovals` returns. */
export interface ApprovalFilter {
  state?: ApprovalState;
  /** Only this transcript's (`sessionId`), all of them. */
  sessionId?: string;
  /** Only this session's (`sessionKey`, any of its transcripts), all of them. */
  sessionKey?: string;
  /**
   * Only the pending ones whose deadline is at or before this time (ms), soonest first, all of
   * them (`state` is implied).
   */
  dueBy?: number;
}
/** How an approval was answered; `timeout` and `superseded` are the gateway's own. */
export type ApprovalDecision = "approve" | "approve_session" | "deny" | "timeout" | "superseded";

/** A tool call waiting for (or answered by) a human. */
export interface ApprovalRecord {
  /** Short random id, as in `/approve <id>` and the callback data `approve:<id>`. */
  id: string;
  sessionKey: string;
  sessionId: string;
  turnId: number;
  toolCallId: string;
  toolName: string;
  /** What is shown to the human (the command, or the MCP tool and its arguments). */
  summary: string;
  /** Why it needs approval: a rule id, the unit `approve_session` grants. */
  rule: string;
  reason: string;
  /** The chat that was asked. */
  address: ChatAddress | null;
  /** `<platform>:<user id>` of who started the turn; they may answer, besides operators. */
  requester: string | null;
  /**
   * Whose turn asked: the person (`<platform>:<user id>`) or the `/v1` credential
   * (`api:<credential>`); "approve for session" grants to them alone. Null when unknown.
   */
  asker: string | null;
  /** What "approve for session" grants (normalized commands, `tool:<name>`). */
  grants: string[];
  state: ApprovalState;
  decision: ApprovalDecision | null;
  decidedBy: string | null;
  createdAt: number;
  deadlineAt: number;
  decidedAt: number | null;
}

export type ApprovalRequestInput = Pick<
  ApprovalRecord,
  | "id"
  | "sessionKey"
  | "sessionId"
  | "turnId"
  | "toolCallId"
  | "toolName"
  | "summary"
  | "rule"
  | "reason"
  | "address"
  | "requester"
  | "asker"
  | "grants"
  | "deadlineAt"
> & { arguments: string };

export interface ApprovalDecisionInput {
  id: string;
  decision: ApprovalDecision;
  decidedBy: string | null;
}
