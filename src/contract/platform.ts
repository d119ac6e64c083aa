/**
 * The contract between the runner and each chat platform. Adapters produce InboundMessages and
 * hand them to the sink (which stores them durably before returning); the runner asks adapters
 * to deliver replies and notices, and tells those that show turns live what a turn is doing.
 * This module imports nothing of ours: every layer may speak it (scripts/import-layers.ts).
 */

/** Where a conversation lives on its platform; replies and notices go back here. */
export interface ChatAddress {
  platform: string;
  chatId: string;
  /** Forum topic / thread id, when the platform has one. */
  threadId?: string;
  /** The platform message a reply should answer (Telegram reply_to_message_id). */
  replyToMessageId?: string;
}

export interface InboundMessage {
  platform: string;
  chatId: string;
  /** Unique per platform + chat: a redelivered message carries the same id and is ignored. */
  platformMessageId: string;
  /** The chat lane, e.g. `agent:main:telegram:dm:42`. */
  sessionKey: string;
  text: string;
  senderId?: string;
  senderName?: string;
  /** Where replies go. */
  address: ChatAddress;
  /**
   * The sender has operator rights (control-token holder, Telegram admin): only then do
   * gateway-wide commands such as `/restart` act. Set by the adapter; stored with the message.
   */
  operator?: boolean;
  /**
   * The credential that sent it (a kind, or a hash of the API key; never the secret): recorded on
   * the session the message creates, and only there. Set by the `/v1` adapter.
   */
  credential?: string;
  /**
   * Earlier conversation for a session seen for the first time (a stateless OpenAI-API request
   * carries its whole history); ignored when the session already has messages.
   */
  history?: { role: "user" | "assistant" | "system"; content: string }[];
  /**
   * Sent while Keel was not listening and delivered late (a platform's replay after a resume, a
   * catch-up over its history): it queues behind the session's running turn instead of
   * interrupting it, like the backlog a restart finds in the inbox. Not stored.
   */
  backlog?: boolean;
  /**
   * A client's idempotency key (the API's `Idempotency-Key`): stored with the inbox row, in the
   * same transaction. A later message with the same scope and key is not stored again.
   */
  idempotency?: IdempotencyClaim;
  /**
   * Files that came with the message, as platform references (stored with the inbox row, in the
   * same transaction); the runner fetches them during the turn.
   */
  attachments?: InboundAttachment[];
  /**
   * Functions the client offers the model beside Keel's tools (the `/v1` request's `tools`), and
   * the results of the client's earlier calls this message carries (stored with the inbox row).
   */
  clientTools?: ClientTools;
  /**
   * Which conversation a stateless `/v1` request carried (a hash of its credential and its user
   * messages): a later request extending it finds its session by this (stored with the row).
   */
  thread?: string;
}

/** A function a `/v1` client defines: the model may call it; the client runs it. */
export interface ClientToolSpec {
  type: "function";
  function: { name: string; description?: string; parameters?: Record<string, unknown> };
}

/** A result the client sends for one of its functions the model called. */
export interface ClientToolResult {
  toolCallId: string;
  content: string;
}

export interface ClientTools {
  tools: ClientToolSpec[];
  /** Results for calls the session's transcript holds unanswered: the turn continues from them. */
  results?: ClientToolResult[];
}

/** A call the model made to a client's function: the turn ends, the client runs it. */
export interface ClientToolCall {
  id: string;
  name: string;
  arguments: string;
}

export type AttachmentKind = "photo" | "document" | "voice" | "audio";

/** A file a user sent, known by the platform's reference until the turn fetches it. */
export interface InboundAttachment {
  kind: AttachmentKind;
  /** The platform's reference (Telegram `file_id`), or a URL for platforms that give one. */
  ref: string;
  /** The file name as sent, when the platform tells it. */
  name?: string;
  mime?: string;
  /** Size in bytes as the platform reports it, before any download. */
  size?: number;
}

/** A file the agent sent (`send_file`), copied into Keel's file store; served at `/files/<id>`. */
export interface OutboundFile {
  id: string;
  /** Where Keel keeps the copy that is sent (not the agent's original). */
  path: string;
  name: string;
  mime: string;
  size: number;
}

export interface IdempotencyClaim {
  /** Who sent the key (a hash of the credential): keys of different clients never collide. */
  scope: string;
  key: string;
  /** Canonical hash of the request: the same key with another request is a conflict. */
  requestHash: string;
  /** How long the key is kept. */
  ttlMs: number;
}

/**
 * Why the runner does not take new work right now. Chat platforms get a friendly text reply;
 * a platform that answers in its own response (HTTP) maps this to a status.
 */
export type Refusal = "no_model" | "draining" | "stopping" | "restarting";

export interface AcceptResult {
  /** False when this platform message, or its idempotency key, was already stored (redelivery). */
  accepted: boolean;
  inboxId: number;
  /** The session id the message belongs to (stable until /new). */
  sessionId: string;
  /**
   * The message's idempotency key was first used for a different request: nothing was stored
   * (`inboxId` and `sessionId` are the first request's).
   */
  idempotencyConflict?: boolean;
}

/** The runner's intake. `receive` resolves only once the message is committed to the inbox. */
export interface InboundSink {
  receive(message: InboundMessage): Promise<AcceptResult>;
  /**
   * Stores messages that arrived together (a page of a catch-up), in order, each as `receive`
   * does: a chat's messages among them wait for one another and start one turn. Stops at the
   * first that is not stored (it throws). Absent: the platform calls `receive` for each.
   */
  receiveAll?(messages: InboundMessage[]): Promise<AcceptResult[]>;
  /**
   * A button press on an approval card. Resolves once the decision is committed (or refused),
   * with the text to show the presser and, when it was decided now, the card's new text.
   */
  answerApproval?(press: ApprovalPress): Promise<ApprovalPressResult>;
  /**
   * Why a message with this text would be refused right now, or null (chat commands are always
   * handled). A platform that can answer a refusal in its own response asks first and stores
   * nothing; a message refused after it was stored still gets the runner's text reply.
   */
  refusalFor?(text: string): Refusal | null;
}

export interface OutboundReply {
  /** Outbox row id (stable across restarts; adapters may use it for idempotency). */
  outboxId: number;
  sessionKey: string;
  sessionId: string;
  address: ChatAddress;
  text: string;
  /** `reply` answers a turn; `notice` is a lifecycle or command message. */
  kind: "reply" | "notice";
  /** A file to send; `text` is then its caption (may be empty). */
  file?: OutboundFile;
  /** The turn a reply answers (its streamed messages become the reply). */
  turnId?: number | null;
  /**
   * The message asks a human to approve a tool call: platforms with buttons offer approve once,
   * approve for the session, and deny (Telegram callback data `approve:<id>`,
   * `approve_session:<id>`, `deny:<id>`). The text already says how to answer with `/approve`.
   */
  approvalId?: string;
  /**
   * When the row was queued (epoch ms). A row queued before this process started may have been
   * sent already by the process before it; an adapter that can look for an earlier send (Slack)
   * checks first, and bounds its search with this time.
   */
  createdAt?: number;
}

/**
 * A running turn's progress, for platforms that show it while the agent works (a reply edited
 * in place as it is written, tool activity). Sent only for turns that answer a chat.
 */
export type ProgressUpdate = { turnId: number; address: ChatAddress } & ProgressStep;

export type ProgressStep =
  | { type: "turn_start" }
  | { type: "event"; event: TurnEvent }
  | { type: "turn_end"; stopReason: StopReason };

export type PlatformState = "starting" | "connected" | "error" | "stopped";

export interface PlatformStatus {
  state: PlatformState;
  error: string | null;
}

/**
 * How a platform connection is doing, for status pages and alerts: `connected`; `reconnecting`
 * (connecting, or retrying after trouble); `stalled` (connected but silent for longer than the
 * platform ever is); `down` (stopped trying until an operator acts, a rejected token); `disabled`
 * (not running).
 */
export type ConnectionHealth = "connected" | "reconnecting" | "stalled" | "down" | "disabled";

export interface ConnectionReport {
  state: ConnectionHealth;
  /** When the platform last spoke to us (an answered poll, an event, a heartbeat); epoch ms. */
  lastEventAt: number | null;
}

/**
 * Several gateways on one store: a platform connection that only one of them may hold at a
 * time (the Telegram poller of a bot token) is held through this lease (src/cluster). Every
 * gateway still sends; only the holder receives.
 */
export interface ConnectionLease {
  /**
   * Waits until this gateway holds the connection, then resolves with a signal that aborts
   * when the hold is lost (a renewal refused or overdue); null once `signal` aborts first.
   * `onStandby` is called when it finds another gateway holding it.
   */
  acquire(signal: AbortSignal, onStandby?: () => void): Promise<AbortSignal | null>;
  /** Lets the connection go, so another gateway takes it at once (a stop). */
  release(): Promise<void>;
}

export interface PlatformAdapter {
  readonly name: string;
  /** Connects and starts producing messages into `sink`. Must not throw for network trouble:
   *  report it through status() and keep retrying. */
  start(sink: InboundSink): Promise<void>;
  /** Stops intake and disconnects; bounded in time even when the platform hangs. */
  stop(): Promise<void>;
  /** Sends one reply. Throws when the platform did not accept it (the outbox keeps it pending). */
  deliver(reply: OutboundReply): Promise<void>;
  /**
   * True when a turn's reply reaches the chat through the turn itself (the API answers the
   * waiting request from the turn's events): the reply is then stored as delivered when the turn
   * finishes, and `deliver` gets only notices. Optional; default false.
   */
  readonly repliesInBand?: boolean;
  /**
   * An approval was answered (by any path): a platform that showed it as a card with buttons
   * updates the card to `text`; `address` is the chat that was asked. Optional; never throws
   * for platform trouble.
   */
  approvalAnswered?(approvalId: string, text: string, address: ChatAddress): Promise<void>;
  /** Shows activity (typing) in a chat until the returned function is called. Optional. */
  showTyping?(address: ChatAddress): () => void;
  /**
   * Every live runner event, for a platform that shows turns as they run (the API's streams, the
   * web chat). Optional; must not throw (the gateway isolates it anyway).
   */
  onRunnerEvent?(event: RunnerEvent): void;
  /**
   * The progress of a turn that answers one of this platform's chats, with its address (a chat
   * platform edits a message in place as the reply is written). Optional; must not throw.
   */
  progress?(update: ProgressUpdate): void;
  /**
   * Downloads a file a user sent on this platform; throws {@link FileTooLargeError} when it is
   * over `maxBytes`, any other error when it could not be fetched (after the adapter's retries).
   */
  fetchFile?(attachment: InboundAttachment, maxBytes: number, signal: AbortSignal): Promise<Buffer>;
  status(): PlatformStatus;
  /** The connection's health and last sign of life (platforms/kit/connection-state.ts). Optional. */
  connection?(): ConnectionReport;
}

/** Someone pressed an approval button. */
export interface ApprovalPress {
  approvalId: string;
  decision: "approve" | "approve_session" | "deny";
  platform: string;
  userId: string;
  userName?: string;
  /** The presser has operator rights on this platform (admin_users). */
  operator: boolean;
  /** The chat the card is in (a press from another chat is refused). */
  chatId: string;
}

export interface ApprovalPressResult {
  /** Short answer to the presser (Telegram shows it as a toast). */
  toast: string;
  /** The card's new text when this press decided it; null when nothing changed. */
  cardText: string | null;
}
/** Why a turn ended. `error` and `aborted` carry an `errorMessage`. */
export type StopReason = "stop" | "max_iterations" | "error" | "aborted";

/** Events a running turn emits, in order, for streaming to clients. */
export type TurnEvent =
  | { type: "text_delta"; text: string }
  | { type: "tool_start"; toolCallId: string; name: string; arguments: string }
  | { type: "tool_end"; toolCallId: string; name: string; output: string; isError: boolean };

/** Why a running turn was aborted (`shutdown`: the gateway is stopping or restarting). */
export type AbortCause = "interrupt" | "user_stop" | "new_session" | "shutdown";

/** Live events the runner publishes while turns run (streaming to API clients and the web chat). */
export type RunnerEventBody =
  | TurnEvent
  | {
      type: "turn_start";
      inboxId: number | null;
      resume: boolean;
      /** When the message that starts it was accepted (epoch ms); absent for a resume. */
      receivedAt?: number;
    }
  | {
      type: "turn_end";
      inboxId: number | null;
      stopReason: StopReason;
      reply: string;
      /** Why an aborted turn was aborted (`shutdown`: the gateway is stopping or restarting). */
      abortCause: AbortCause | null;
      /** Tokens of the turn's model calls (summaries excluded). */
      usage?: TurnUsage;
      /** The turn stopped at calls to the client's functions (`/v1` tools): the client runs them. */
      clientToolCalls?: ClientToolCall[];
      /** The turn stopped at a tool call that waits for a human's approval (its id). */
      awaitingApproval?: string;
    };

/** Tokens a turn used, summed over its model calls; `estimated` when any call reported none. */
export interface TurnUsage {
  promptTokens: number;
  completionTokens: number;
  estimated: boolean;
}

export type RunnerEvent =
  | (RunnerEventBody & { sessionKey: string; sessionId: string; turnId: number })
  | RefusedEvent;

/**
 * A stored message the runner refused without a turn (its text reply is queued as usual): lets a
 * platform that answers in its own response report the refusal instead of the text.
 */
export interface RefusedEvent {
  type: "refused";
  sessionKey: string;
  sessionId: string;
  inboxId: number;
  refusal: Refusal;
}

export type RunnerEventListener = (event: RunnerEvent) => void;

/** A file over the size Keel accepts; `size` when the platform said how large it is. */
export class FileTooLargeError extends Error {
  constructor(
    readonly maxBytes: number,
    readonly size?: number,
  ) {
    super(`file larger than ${Math.round(maxBytes / 1_048_576)} MB`);
  }
}
