/**
 * The store contract: everything durable goes through this interface, one method per
 * transaction. Two implementations (SQLite in sqlite-store.ts, Postgres in pg-store.ts) pass the
 * same suite (store*.test.ts), so nothing here may assume either. Times are epoch milliseconds.
 */
import type { ChatMessage } from "../agent/types.js";
import type {
  ChatAddress,
  ClientToolSpec,
  InboundMessage,
  OutboundFile,
} from "../platforms/platform.js";

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
   * `accepted: false` and changes nothing. With an idempotency key, the key is stored in the same
   * transaction; a live key seen before (same scope) returns the first message's item with
   * `accepted: false` and changes nothing (`idempotencyConflict` when its request hash differs).
   * Expired keys are pruned then.
   */
  acceptInbound(
    message: InboundMessage,
    /**
     * A scheduled fire: the job's cursor moves in the same transaction, so a crash never loses
     * or doubles the fire. Throws {@link ScheduleChangedError} (and stores nothing) when the job
     * was deleted, paused or moved since the caller read it.
     */
    advance?: ScheduleAdvance,
  ): Promise<AcceptInboundResult>;
  /** True while an inbox item of this platform chat is pending or running. */
  hasOpenInbox(platform: string, chatId: string): Promise<boolean>;
  /** The live (unexpired) idempotency key `key` of `scope`, with the item it was first used for. */
  findIdempotencyKey(scope: string, key: string): Promise<IdempotencyRecord | null>;
  /**
   * What answered an inbox item, read from the record: its turn's reply, following a turn cut off
   * by a restart into the turns that continued it (a resume, or a `/retry`), or the notice that
   * closed it without a turn. `open` while it is queued or running, or cut off with its
   * continuation still to come (the session is resume-pending).
   */
  findInboxAnswer(inboxId: number): Promise<InboxAnswer>;
  /** Inbox items not yet finished (pending or running), oldest first. */
  listOpenInbox(): Promise<InboxItem[]>;
  /**
   * Several gateways: the pending inbox items no live gateway will run, made `owner`'s in the
   * same transaction (so each goes to one gateway), oldest first. Those are the items accepted by
   * a gateway whose heartbeat is older than `staleMs` or whose row is gone; with `includeOwn`
   * (at start-up) also `owner`'s own (a restart under the same id) and those no gateway stamped.
   */
  adoptPendingInbox(
    owner: string,
    staleMs: number,
    options?: { includeOwn?: boolean },
  ): Promise<InboxItem[]>;
  /**
   * Marks an inbox item done or cancelled without a turn (commands, refused messages); with
   * `notice`, queues that answer to the item's chat in the same transaction, so a crash can never
   * leave a message closed but unanswered. A cancelled (refused) item frees its idempotency key:
   * it did no work, so a retry may.
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
  /** Newest first; `internal: false` leaves out Keel's own lanes (keys starting `system:`). */
  listSessions(options?: {
    limit?: number;
    platform?: string;
    internal?: boolean;
  }): Promise<SessionSummary[]>;

  /**
   * A transcript's messages in order; with `afterSeq`, only those after it (a turn needs only
   * what its latest compaction does not already stand in for). The message objects may be
   * shared between calls (the SQLite store keeps them parsed): callers must not change them.
   */
  loadTranscript(sessionId: string, afterSeq?: number): Promise<StoredMessage[]>;
  /**
   * The session of the newest inbox message that carried `thread` (a stateless `/v1`
   * conversation), with the transcript it went to; null when none did.
   */
  findThread(thread: string): Promise<{ sessionKey: string; sessionId: string } | null>;
  /**
   * What a turn works from, in one read: the transcript's latest compaction, the messages after
   * it, and the tool calls a crash left started without a result.
   */
  loadTurnHistory(sessionId: string): Promise<TurnHistory>;
  /*
   * The writes of a turn (appendMessages, startTurn, finishTurn, recordToolStart/Finish) take the
   * session's lease when the gateway shares its store: each checks the token in its own
   * transaction and throws LeaseLostError, storing nothing, when the lease moved on.
   */
  /** Appends messages to a transcript in one transaction (e.g. a model call's assistant message). */
  appendMessages(
    sessionId: string,
    turnId: number | null,
    messages: ChatMessage[],
    /** Inbox items these messages carry (steered input): closed in the same transaction. */
    closeInboxIds?: number[],
    /** Tokens of the model call that produced these messages, stored in the same transaction. */
    usage?: UsageInput,
    lease?: LeaseToken,
  ): Promise<void>;

  /**
   * Records a compaction and the usage of the call that wrote it, in one transaction: from now on
   * `summary` stands in for the transcript's messages up to `throughSeq` in what is sent to the
   * model. Throws when `throughSeq` does not go past the latest compaction (no progress).
   */
  recordCompaction(input: CompactionInput): Promise<CompactionRecord>;
  /** The newest compaction of a transcript, or null. */
  latestCompaction(sessionId: string): Promise<CompactionRecord | null>;
  /** Tokens used by a transcript's model calls. */
  sessionUsage(sessionId: string): Promise<UsageTotals>;
  /** Sets the model `/model` chose for a session key (null: back to the main model). */
  setSessionModel(key: string, model: string | null): Promise<void>;

  /**
   * Starts a turn: the inbox item (if any) goes to `running`, the turn row is created, the
   * user's text is appended to the transcript and, when given, the turn's reply address becomes
   * the session's origin (where a resume of this turn replies), all at once. An inbox item
   * starts one turn, ever: when it is no longer pending (another gateway started it) this throws
   * InboxItemTakenError and stores nothing.
   *
   * Unlike every other write, it settles once committed, without waiting for the disk, and reads
   * do not wait for it either: nothing leaves the gateway on the strength of a start alone (the
   * model call is not an effect; a tool runs only after its own start is durable, a reply after
   * the finish), and the disk flush that write waits for covers the start too. A power cut
   * before then loses the start, not the message: the item is still pending and runs again.
   * (Postgres commits it as any other write: its server can crash while the gateway goes on.)
   */
  startTurn(input: StartTurnInput): Promise<StartedTurn>;
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
  /**
   * The media steps already recorded for an inbox item (downloads, transcripts), by step name,
   * each result as it was recorded.
   */
  listMediaSteps(inboxId: number): Promise<Record<string, unknown>>;
  /**
   * Records a media step's result once (a step already recorded keeps its first result, and false
   * is returned). With `notice`, queues it to the item's chat in the same transaction, so a crash
   * can neither lose the notice nor give it twice.
   */
  recordMediaStep(input: MediaStepInput): Promise<boolean>;
  /**
   * Queues a notice to the chat unless the notice `name` was already given in this transcript
   * (then null): recorded and queued in one transaction, so it is given once whatever crashes
   * or restarts follow.
   */
  enqueueNoticeOnce(input: OnceNoticeInput): Promise<OutboxItem | null>;
  /** A file the agent sent, for `GET /files/:id`. */
  getSentFile(id: string): Promise<SentFile | null>;

  /** Queues a notice or reply outside a turn (lifecycle notices, command answers). */
  enqueueOutbox(input: OutboxInput): Promise<OutboxItem>;
  /**
   * Queues a notice about the session's unanswered request and records that it was given, unless
   * this notice was already given since the session's last answered turn (then null): a notice
   * goes once, whatever crashes follow.
   */
  enqueueRequestNotice(input: RequestNoticeInput): Promise<OutboxItem | null>;
  listPendingOutbox(platform?: string): Promise<OutboxItem[]>;
  /**
   * Marks a row delivered. With `lease` (the chat's delivery lease, several gateways) only while
   * it is still held: otherwise throws LeaseLostError and marks nothing.
   */
  markDelivered(outboxId: number, lease?: LeaseToken): Promise<void>;
  /** Records a failed attempt; after `maxAttempts` the row becomes `failed`. */
  markDeliveryFailed(outboxId: number, maxAttempts: number): Promise<void>;

  /**
   * Records a chat message that shows a piece of a turn's reply (`piece` 0 is the first), or its
   * new text or state: one row per turn and piece, replaced on each call.
   */
  saveStreamMessage(input: StreamMessage): Promise<void>;
  /** A turn's stream messages in piece order, with the turn's state (null for an unknown turn). */
  getStreamTurn(turnId: number): Promise<StreamTurn>;
  /**
   * Open stream messages of a platform that nothing will finish: their turn is no longer
   * running and has no reply waiting to be delivered (cut off by a stop or a crash). Oldest first.
   */
  listLeftoverStreams(platform: string): Promise<StreamTurn[]>;

  /**
   * Marks sessions resume-pending (keeps an existing reason), bumping their interrupt count.
   * Suspended sessions are left alone: suspension wins.
   */
  markResumePending(keys: string[], reason: ResumeReason): Promise<void>;
  clearResumePending(key: string): Promise<void>;
  /** How many sessions there are (Keel's own lanes included) and how many are resume-pending. */
  countSessions(): Promise<{ total: number; resumePending: number }>;
  /** Sessions updated since `sinceMs` that are not resume-pending yet. */
  listSessionsActiveSince(sinceMs: number): Promise<SessionRecord[]>;
  listResumePending(): Promise<SessionRecord[]>;
  setSuspended(key: string, suspended: boolean): Promise<void>;

  /** Creates (or returns the live) pairing code for a user who is not allowed yet. At most
   *  `maxPending` live codes per platform: beyond that returns null. Codes expire after `ttlMs`. */
  requestPairing(input: PairingRequestInput): Promise<PairingRequest | null>;
  listPairingRequests(platform?: string): Promise<PairingRequest[]>;
  /**
   * Approves a live code; returns the request approved, or null for an unknown/expired code.
   * With `notice`, the same transaction queues it to the user's chat through the outbox, so it
   * reaches them even when the approval happens while no gateway runs.
   */
  approvePairing(code: string, notice?: string): Promise<PairingRequest | null>;
  /** Users let in through pairing (one entry per user, newest approval). */
  listApprovedUsers(platform?: string): Promise<PairingRequest[]>;
  /** Takes back every pairing approval of the user; returns how many were removed. */
  revokeUser(platform: string, userId: string): Promise<number>;
  isUserApproved(platform: string, userId: string): Promise<boolean>;

  /** Appends a durable event to a named channel (web chat replay); returns its sequence number. */
  appendChannelEvent(channel: string, payload: unknown): Promise<number>;
  /** Events of a channel with a sequence number above `afterSeq`, oldest first. */
  listChannelEvents(
    channel: string,
    afterSeq: number,
    limit?: number,
  ): Promise<{ seq: number; payload: unknown }[]>;

  /**
   * Stores a new scheduled job; throws {@link ScheduleNameTakenError} when the name is in use.
   * An existing session under the job's key (left by an earlier job of that name) gets a fresh
   * transcript in the same transaction.
   */
  createScheduleJob(input: ScheduleJobInput): Promise<ScheduleJob>;
  /** Every job, by name. */
  listScheduleJobs(): Promise<ScheduleJob[]>;
  getScheduleJob(name: string): Promise<ScheduleJob | null>;
  /** Removes a job; false when there was none. Fires already in the inbox still run. */
  deleteScheduleJob(name: string): Promise<boolean>;
  /**
   * Moves a job's cursor without firing (slots skipped by the misfire policy); null retires the
   * job. False when the job changed since the caller read it.
   */
  skipScheduleSlots(
    jobId: number,
    expectedNextFireAt: number,
    nextFireAt: number | null,
  ): Promise<boolean>;
  /** Pauses a job, saying why; null when there is none. */
  pauseScheduleJob(name: string, reason: string): Promise<ScheduleJob | null>;
  /** Resumes a job from `nextFireAt`, its failure streak cleared; null when there is none. */
  resumeScheduleJob(name: string, nextFireAt: number | null): Promise<ScheduleJob | null>;
  /**
   * Counts a finished run of a job: success clears the failure streak, a failure extends it and
   * pauses the job once it reaches `pauseAfter`. Null when the job is gone.
   */
  recordScheduleRun(
    name: string,
    ok: boolean,
    pauseAfter: number,
  ): Promise<{ job: ScheduleJob; pausedNow: boolean } | null>;

  /**
   * Records a gateway sharing this store (or refreshes its row after a restart under the same
   * id); its heartbeat starts now.
   */
  registerInstance(instance: InstanceInput): Promise<InstanceRecord>;
  /** Refreshes the instance's heartbeat; false when its row is gone (it was removed). */
  heartbeatInstance(id: string): Promise<boolean>;
  /** Removes the instance (a planned stop) and gives up its session leases. */
  removeInstance(id: string): Promise<void>;
  /** Every registered instance, oldest first. */
  listInstances(): Promise<InstanceRecord[]>;
  /** Ids of the instances that heartbeated within `staleMs` (the store's clock). */
  listLiveInstances(staleMs: number): Promise<string[]>;
  /**
   * Forgets the instances silent (no heartbeat) for at least `silentForMs` on the store's clock
   * whose cut-off turns were taken over: none still runs a turn under one of their session
   * leases. Their leases are left as they are (expired by then). Returns the removed rows.
   */
  removeDeadInstances(silentForMs: number): Promise<InstanceRecord[]>;
  /**
   * Leases are keyed by name: a session's key, `outbox:<chat>` for a chat's delivery, and
   * `poller:<platform>:<hash>` for a platform connection only one gateway may hold (cluster/).
   *
   * Takes the session's lease for `owner` for `ttlMs`, unless another owner holds a live one
   * (then null). Taking it from another owner (or after them) raises the fence, so their writes
   * with the old token fail from then on; renewing your own keeps it.
   */
  claimSessionLease(sessionKey: string, owner: string, ttlMs: number): Promise<SessionLease | null>;
  /**
   * Extends a lease still held with this token; null when it moved on or was let go (released,
   * or freed with its gateway's instance): a renewal landing just after must not take it back
   * from the gateway about to claim it.
   */
  renewSessionLease(lease: LeaseToken, ttlMs: number): Promise<SessionLease | null>;
  /** Lets the lease go (another owner may take it at once); nothing when it already moved on. */
  releaseSessionLease(lease: LeaseToken): Promise<void>;
  /** Current leases (live or not), by session key. */
  listSessionLeases(): Promise<SessionLease[]>;
  /**
   * Journals a tool call as `awaiting_approval` together with its approval (one transaction),
   * before anything runs. Idempotent per approval id.
   */
  requestApproval(input: ApprovalRequestInput): Promise<ApprovalRecord>;
  getApproval(id: string): Promise<ApprovalRecord | null>;
  /** The latest approval asked for this tool call in this transcript, if any. */
  findApprovalForCall(sessionId: string, toolCallId: string): Promise<ApprovalRecord | null>;
  /**
   * Approvals, newest first (the latest 500 unless a filter narrows them; see ApprovalFilter):
   * a new message supersedes every one of its transcript still pending, the deadline check
   * times out every one due.
   */
  listApprovals(options?: ApprovalFilter): Promise<ApprovalRecord[]>;
  /**
   * Answers a pending approval once: the approval and its journal row move together, and
   * `approve_session` also grants its units to its asker in the transcript (none when the asker
   * is unknown). A second answer changes nothing
   * (`changed: false`, the record as first decided); null for an unknown id.
   */
  decideApproval(
    input: ApprovalDecisionInput,
  ): Promise<{ record: ApprovalRecord; changed: boolean } | null>;
  /**
   * True when `approve_session` granted every one of `units` (at least one) to `asker` in this
   * transcript.
   */
  hasApprovalGrants(sessionId: string, asker: string, units: readonly string[]): Promise<boolean>;
  /**
   * Decided approvals whose tool call has no later journal row yet in a transcript its session
   * still uses: the decision still has to be applied by a turn (after a crash, at start).
   */
  listUnappliedDecisions(): Promise<ApprovalRecord[]>;
  /**
   * A platform adapter's durable state under `key` (the Discord gateway session: id, resume URL,
   * sequence), or null when none is stored.
   */
  getPlatformState(key: string): Promise<unknown>;
  /** Replaces a platform adapter's durable state under `key`; null deletes it. */
  setPlatformState(key: string, value: unknown): Promise<void>;
  /**
   * The latest stored message of each chat of `platform` that received a message since `sinceMs`
   * (what a catch-up after downtime reads on from).
   */
  listRecentChats(platform: string, sinceMs: number): Promise<RecentChat[]>;

  /** Online copy of the database to `path` (a consistent snapshot while the gateway runs). */
  backup(path: string): Promise<void>;
  /**
   * Why this store can commit nothing more, or null while it can. Such a store stays broken
   * until a new process opens it again (SQLite: its WAL could not be flushed to disk).
   */
  failure(): Error | null;
  close(): Promise<void>;
}

export interface InstanceInput {
  id: string;
  host: string;
  pid: number;
  startedAt: number;
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
   * Input after the user message, in the same transaction: the results of a `/v1` client's
   * calls, which the turn continues from.
   */
  inputMessages?: ChatMessage[];
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

export interface CompactionRecord {
  id: number;
  sessionId: string;
  turnId: number | null;
  throughSeq: number;
  summary: string;
  tokensBefore: number;
  tokensAfter: number;
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
