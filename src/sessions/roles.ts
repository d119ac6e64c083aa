/**
 * The store by role: each interface is one part of what is durable, and each consumer takes the
 * roles it uses (the runner turns and inbox, the dispatcher the outbox, ...). `Store` (store.ts)
 * is all of them, one method per transaction, implemented for SQLite and Postgres. Kept to at
 * most 25 methods a role.
 */
import type { ChatMessage } from "../agent/types.js";
import type { ChatAddress, InboundMessage } from "../contract/platform.js";
import type {
  BudgetDecision,
  BudgetPauseFilter,
  BudgetPauseInput,
  BudgetPauseRecord,
  SpendQuery,
  SpendScope,
  SpendTotals,
} from "./budget-records.js";
import type {
  AcceptInboundResult,
  ApprovalDecisionInput,
  ApprovalFilter,
  ApprovalRecord,
  ApprovalRequestInput,
  CompactionInput,
  CompactionRecord,
  FinishTurnInput,
  IdempotencyRecord,
  InboxAnswer,
  InboxItem,
  LeaseToken,
  MediaStepInput,
  OnceNoticeInput,
  OutboxInput,
  OutboxItem,
  PairingRequest,
  PairingRequestInput,
  RecentChat,
  RequestNoticeInput,
  ResumeReason,
  ScheduleAdvance,
  ScheduleJob,
  ScheduleJobInput,
  ScheduleNameTakenError,
  SentFile,
  SessionRecord,
  SessionSummary,
  StartedTurn,
  StartTurnInput,
  StoreBacklog,
  StoredMessage,
  StreamMessage,
  StreamTurn,
  ToolFinishInput,
  ToolStartInput,
  TurnHistory,
  TurnRecord,
  UsageInput,
  UsageTotals,
} from "./records.js";
import type {
  ForgetResult,
  PersonData,
  PersonRef,
  PruneCounts,
  RetentionCutoffs,
  RetentionHolds,
  StoreCounts,
} from "./retention-records.js";
import type { ChildTurn, TaskEnd, TaskInput, TaskRecord, TaskState } from "./task-records.js";

export type { ClusterStore } from "./cluster/role.js";

/**
 * What comes in: inbound messages committed before they are acknowledged, their idempotency keys,
 * what answered them, and the media steps taken on them.
 */
export interface InboxStore {
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
  /**
   * `acceptInbound`'s transaction, settled once it is committed: `onDisk` settles once it is on
   * disk too (at once where a commit is, as on Postgres). The runner starts the message's turn
   * in between and acknowledges it only after `onDisk`; nothing the turn does outside the
   * gateway comes before a write that waits for the disk, which covers this commit as well.
   */
  commitInbound(
    message: InboundMessage,
    advance?: ScheduleAdvance,
  ): Promise<AcceptInboundResult & { onDisk: Promise<void> }>;
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
  /**
   * The session of the newest inbox message that carried `thread` (a stateless `/v1`
   * conversation), with the transcript it went to; null when none did.
   */
  findThread(thread: string): Promise<{ sessionKey: string; sessionId: string } | null>;
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
}

/** Session records: which transcript a key points at, its chosen model, resume and suspension state. */
export interface SessionStore {
  getSession(key: string): Promise<SessionRecord | null>;
  getSessionById(sessionId: string): Promise<SessionRecord | null>;
  /** Creates the session row for `key` if it does not exist yet. */
  ensureSession(key: string, origin: ChatAddress | null): Promise<SessionRecord>;
  /** Points `key` at a fresh transcript and clears resume/suspension state; returns the new id. */
  resetSession(key: string): Promise<SessionRecord>;
  /** Sets the model `/model` chose for a session key (null: back to the main model). */
  setSessionModel(key: string, model: string | null): Promise<void>;

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
}

/** Turns and their journal: the transcript, compactions, turn rows and tool calls. */
export interface TurnStore {
  /**
   * A transcript's messages in order; with `afterSeq`, only those after it (a turn needs only
   * what its latest compaction does not already stand in for). The message objects may be
   * shared between calls (the SQLite store keeps them parsed): callers must not change them.
   */
  loadTranscript(sessionId: string, afterSeq?: number): Promise<StoredMessage[]>;
  /** Each transcript's last message, in one read (start-up's check of every cut-off session). */
  loadLastMessages(sessionIds: readonly string[]): Promise<Map<string, ChatMessage>>;
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

  /**
   * Starts a turn: the inbox item (if any) goes to `running`, the turn row is created, the
   * user's text is appended to the transcript and, when given, the turn's reply address becomes
   * the session's origin (where a resume of this turn replies), all at once. An inbox item
   * starts one turn, ever: when it is no longer pending (another gateway started it) this throws
   * InboxItemTakenError and stores nothing. `joined` messages are taken the same way, in the same
   * transaction.
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
   * Ends a turn: turn state, inbox item(s) done, the final assistant message appended and, when
   * there is text for the user, an outbox row queued, all in one transaction.
   */
  finishTurn(input: FinishTurnInput): Promise<OutboxItem | null>;
  /** finishTurn(`interrupted`, no message, no reply) for many in one transaction; all or none. */
  interruptTurns(turns: readonly { turnId: number; lease?: LeaseToken }[]): Promise<void>;
  /** Turns still `running` (after a crash these are the interrupted ones). */
  listRunningTurns(): Promise<TurnRecord[]>;

  /** Journals a tool call as started, before it runs. */
  recordToolStart(input: ToolStartInput): Promise<void>;
  /** Journals the result and appends the matching tool message to the transcript, atomically. */
  recordToolFinish(input: ToolFinishInput): Promise<void>;
  /** A file the agent sent, for `GET /files/:id`. */
  getSentFile(id: string): Promise<SentFile | null>;
}

/** What goes out: replies and notices queued in the transaction that decided them, and their delivery. */
export interface OutboxStore {
  /** Queues a notice or reply outside a turn (lifecycle notices, command answers). */
  enqueueOutbox(input: OutboxInput): Promise<OutboxItem>;
  /**
   * Queues a notice about the session's unanswered request and records that it was given, unless
   * this notice was already given since the session's last answered turn (then null): a notice
   * goes once, whatever crashes follow.
   */
  enqueueRequestNotice(input: RequestNoticeInput): Promise<OutboxItem | null>;
  /**
   * Queues a notice to the chat unless the notice `name` was already given in this transcript
   * (then null): recorded and queued in one transaction, so it is given once whatever crashes
   * or restarts follow.
   */
  enqueueNoticeOnce(input: OnceNoticeInput): Promise<OutboxItem | null>;
  listPendingOutbox(platform?: string): Promise<OutboxItem[]>;
  /**
   * Marks a row delivered. With `lease` (the chat's delivery lease, several gateways) only while
   * it is still held: otherwise throws LeaseLostError and marks nothing.
   */
  markDelivered(outboxId: number, lease?: LeaseToken): Promise<void>;
  /** Records a failed attempt; after `maxAttempts` the row becomes `failed`. */
  markDeliveryFailed(outboxId: number, maxAttempts: number): Promise<void>;
}

/** The chat messages that show a reply while it streams (so a restart can finish or mark them). */
export interface StreamStore {
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
}

/** Tool calls waiting for a human, and the answers. */
export interface ApprovalStore {
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
}

/** Budgets: spend per period and scope key, and the pauses a spent budget holds turns in. */
export interface BudgetStore {
  /** Tokens of the model calls recorded since `query.since` under the query's key. */
  spend(query: SpendQuery): Promise<SpendTotals>;
  /** The same per key of `scope` (keys with calls only), most tokens first. */
  spendByKey(scope: SpendScope, since: number): Promise<(SpendTotals & { key: string })[]>;
  /** Records a pause as pending (idempotent per id: an existing one is returned as it is). */
  requestBudgetPause(input: BudgetPauseInput): Promise<BudgetPauseRecord>;
  getBudgetPause(id: string): Promise<BudgetPauseRecord | null>;
  /** Newest first (the latest 500 unless a filter narrows them). */
  listBudgetPauses(filter?: BudgetPauseFilter): Promise<BudgetPauseRecord[]>;
  /**
   * Answers a pending pause once; a second answer changes nothing (`changed: false`, the record
   * as first decided); null for an unknown id.
   */
  decideBudgetPause(input: {
    id: string;
    decision: BudgetDecision;
    decidedBy: string | null;
  }): Promise<{ record: BudgetPauseRecord; changed: boolean } | null>;
  /** A turn acted on the decision: it is not applied again after a restart. */
  markBudgetPauseApplied(id: string): Promise<void>;
  /** How often the budget was raised for this key in the period starting at `periodStart`. */
  countBudgetRaises(
    budgetId: string,
    scopeKey: string | null,
    periodStart: number,
  ): Promise<number>;
}

/** Who may talk to the gateway through pairing codes. */
export interface PairingStore {
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
}

/** A platform adapter's own durable data: its connection state, catch-up reads, replay channels. */
export interface PlatformDataStore {
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

  /** Appends a durable event to a named channel (web chat replay); returns its sequence number. */
  appendChannelEvent(channel: string, payload: unknown): Promise<number>;
  /** Events of a channel with a sequence number above `afterSeq`, oldest first. */
  listChannelEvents(
    channel: string,
    afterSeq: number,
    limit?: number,
  ): Promise<{ seq: number; payload: unknown }[]>;
}

/** Scheduled jobs and their cursors (a fire itself goes in through InboxStore.acceptInbound). */
export interface ScheduleStore {
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
}

/** What the operator reads: the sessions list, token usage, counts, the queues' backlog. */
export interface ReportingStore {
  /** Newest first; `internal: false` leaves out Keel's own lanes (keys starting `system:`). */
  listSessions(options?: {
    limit?: number;
    platform?: string;
    internal?: boolean;
  }): Promise<SessionSummary[]>;
  /** Tokens used by a transcript's model calls. */
  sessionUsage(sessionId: string): Promise<UsageTotals>;
  /** Tokens used by every model call on record (`lastPromptTokens` is null). */
  totalUsage(): Promise<UsageTotals>;
  /** How many sessions there are (Keel's own lanes included) and how many are resume-pending. */
  countSessions(): Promise<{ total: number; resumePending: number }>;
  /** The queues' sizes, for the metrics a scraper reads (one cheap query). */
  backlog(): Promise<StoreBacklog>;
}

/**
 * Tasks (src/tasks): work a chat or a turn hands to a child session. The child's own work is
 * ordinary inbox rows and journaled turns; this role holds the task's life and its delivery.
 */
export interface TaskStore {
  /**
   * Records a task, `queued`. A task asked for by a `delegate` call exists once per call: the
   * same call again (re-run after a crash) gets the task it created (`created: false`).
   */
  createTask(input: TaskInput): Promise<{ task: TaskRecord; created: boolean }>;
  getTask(id: number): Promise<TaskRecord | null>;
  /** Oldest first; `chat` matches platform and chat id. */
  listTasks(filter?: {
    chat?: { platform: string; chatId: string };
    states?: TaskState[];
    parentSessionKey?: string;
    limit?: number;
  }): Promise<TaskRecord[]>;
  /** `queued → running`; false when it is no longer queued (ended meanwhile). */
  startTask(id: number): Promise<boolean>;
  /**
   * Ends a queued or running task, once: the first call wins (null for later ones). Its notice
   * is queued to the task's chat in the same transaction (`background`: only when the task is
   * background at that moment), so it is delivered once whatever crashes follow.
   */
  endTask(end: TaskEnd): Promise<TaskRecord | null>;
  /** A waiting parent stopped waiting: a foreground task still active becomes background. */
  detachTask(id: number): Promise<TaskRecord | null>;
  /** Background tasks of this parent that ended and are not yet in its transcript. */
  listTaskNotes(parentSessionKey: string): Promise<TaskRecord[]>;
  /** Those tasks are in the parent's transcript now. */
  markTasksNoted(ids: number[]): Promise<void>;
  /** The latest turn of a child session, or null when it has none yet. */
  childTurn(childKey: string): Promise<ChildTurn | null>;
}

/**
 * The data lifecycle (issue 41): pruning by age in small transactions that leave work in progress
 * alone, one person's data for export and erasure, and the counts a backup records. Pruning
 * never touches `model_usage` (usage totals survive without content) nor `session_leases`.
 */
export interface RetentionStore {
  /**
   * Up to `limit` transcript ids after `after` (in id order) holding messages or tool results
   * older than the cut-offs; the caller prunes each with `pruneTranscript`.
   */
  pruneCandidates(
    cutoffs: RetentionCutoffs,
    after: string | null,
    limit: number,
  ): Promise<string[]>;
  /**
   * One transaction: in one transcript, unless it is held (a running turn, pending inbox or
   * outbox rows, an open approval or journal row, resume pending), removes the messages before
   * its first user message newer than `transcriptsBefore` (all of them when there is none; the
   * transcript row too when no session points at it) and replaces tool results older than
   * `toolOutputBefore` with the pruned marker. `dryRun`: counts, then rolls back.
   */
  pruneTranscript(
    sessionId: string,
    cutoffs: RetentionCutoffs,
    dryRun: boolean,
  ): Promise<PruneCounts>;
  /** Up to `limit` session keys after `after` not updated since `before`. */
  idleSessions(before: number, after: string | null, limit: number): Promise<string[]>;
  /**
   * One transaction: removes an idle session whole (row, transcripts, turns, journal, inbox,
   * outbox, approvals), unless it is held or a scheduled job uses it.
   */
  pruneSession(key: string, before: number, dryRun: boolean): Promise<PruneCounts>;
  /**
   * One transaction: up to `limit` finished rows of each loose table (inbox, outbox, web chat
   * events, stream messages, decided approvals) older than `before`.
   */
  pruneLoose(before: number, limit: number, dryRun: boolean): Promise<PruneCounts>;
  /** What the file sweep must leave alone. */
  retentionHolds(): Promise<RetentionHolds>;
  /** Everything stored about one person, in one snapshot. */
  personData(person: PersonRef): Promise<PersonData>;
  /**
   * One transaction: removes the person's own chats whole, redacts their messages in shared
   * ones, removes their pairing rows and the approvals they asked for; refuses (nothing
   * changed) while they have work in progress.
   */
  forgetPerson(person: PersonRef): Promise<ForgetResult>;
  /** Schema version and row counts, for a backup's manifest. */
  storeCounts(): Promise<StoreCounts>;
}

/** The store as a whole: its backup, its health, its end. */
export interface StoreHandle {
  /** Online copy of the database to `path` (a consistent snapshot while the gateway runs). */
  backup(path: string): Promise<void>;
  /**
   * Why this store can commit nothing more, or null while it can. Such a store stays broken
   * until a new process opens it again (SQLite: its WAL could not be flushed to disk).
   */
  failure(): Error | null;
  close(): Promise<void>;
}
