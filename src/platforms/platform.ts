/**
 * The contract between the runner and each chat platform. Adapters produce InboundMessages and
 * hand them to the sink (which stores them durably before returning); the runner asks adapters
 * to deliver replies and notices.
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
   * Earlier conversation for a session seen for the first time (a stateless OpenAI-API request
   * carries its whole history); ignored when the session already has messages.
   */
  history?: { role: "user" | "assistant" | "system"; content: string }[];
}

export interface AcceptResult {
  /** False when this platform message was already stored (redelivery). */
  accepted: boolean;
  inboxId: number;
  /** The session id the message belongs to (stable until /new). */
  sessionId: string;
}

/** The runner's intake. `receive` resolves only once the message is committed to the inbox. */
export interface InboundSink {
  receive(message: InboundMessage): Promise<AcceptResult>;
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
}

export type PlatformState = "starting" | "connected" | "error" | "stopped";

export interface PlatformStatus {
  state: PlatformState;
  error: string | null;
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
  /** Shows activity (typing) in a chat until the returned function is called. Optional. */
  showTyping?(address: ChatAddress): () => void;
  status(): PlatformStatus;
}
