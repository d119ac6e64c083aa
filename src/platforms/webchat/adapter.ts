/**
 * The web chat: browser pages over a WebSocket (docs/webchat-protocol.md). Every event of a
 * conversation is stored in its channel before it is sent, so a page that reconnects replays
 * what it missed from its last sequence number; messages are acknowledged once committed.
 */
import type { IncomingMessage } from "node:http";
import type { Duplex } from "node:stream";
import type { Logger } from "pino";
import type { RawData, WebSocket, WebSocketServer } from "ws";
import type {
  ChatAddress,
  InboundAttachment,
  InboundSink,
  OutboundReply,
  PlatformAdapter,
  RunnerEvent,
} from "../../contract/platform.js";
import { servedStatus } from "../kit/connection-state.js";
import { listConversations, type WebchatStore } from "./conversations.js";
import { LiveTurns } from "./live-turns.js";
import {
  type ClientMessage,
  channelFor,
  conversationIdOf,
  type DurablePayload,
  eventFrame,
  PROTOCOL_VERSION,
  type PublishedTurnEvent,
  parseClientMessage,
  type SentAttachment,
  type ServerMessage,
  STORED_TOOL_ARGUMENT_CHARS,
  STORED_TOOL_OUTPUT_CHARS,
  type StoredToolCall,
  sessionKeyFor,
  toLiveFrame,
} from "./protocol.js";
import { sameOrigin } from "./upgrade-auth.js";
import type { WebchatUploads } from "./uploads.js";

/** The WebSocket subprotocol every page offers; the server always selects it. */
export const SUBPROTOCOL = "keel.v1";

const REPLAY_PAGE = 200;
const MAX_FRAME_BYTES = 1024 * 1024;
const REMEMBERED_OUTBOX_IDS = 1000;

export type { WebchatStore };

export interface WebchatAdapterOptions {
  store: WebchatStore;
  logger: Logger;
  /** Whether an upgrade request may connect, and with operator rights (the caller decides). */
  authorize(req: IncomingMessage): Promise<UpgradeVerdict>;
  /** Interval of WebSocket pings; a client that misses one is dropped. Default 30 s. */
  heartbeatMs?: number;
  /** Where files attached on the page were uploaded; without it messages carry no files. */
  uploads?: WebchatUploads;
}

/** The answer to an upgrade: let in (as an operator or not), or refused with an HTTP status. */
export type UpgradeVerdict =
  | { ok: true; operator: boolean }
  | { ok: false; status: string; retryAfterSeconds?: number };

interface Subscription {
  /** Highest durable seq sent to this client for the conversation. */
  lastSent: number;
  /** True while history is being replayed: new events wait in `pending`. */
  replaying: boolean;
  pending: Array<ServerMessage & { type: "event" }>;
}

interface Client {
  ws: WebSocket;
  subs: Map<string, Subscription>;
  queue: Promise<void>;
  alive: boolean;
  /** Authenticated with operator rights: may use gateway-wide commands such as `/restart`. */
  operator: boolean;
}

/**
 * The web chat platform: a WebSocket endpoint (`GET /ws`) speaking the protocol in
 * docs/webchat-protocol.md. User messages and replies are durable channel events with a
 * seq, so a page that reconnects gets exactly what it missed; finished tool calls are stored
 * too, streaming deltas are live only.
 */
export class WebchatAdapter implements PlatformAdapter {
  readonly name = "webchat";
  private readonly store: WebchatStore;
  private readonly logger: Logger;
  private readonly authorize: (req: IncomingMessage) => Promise<UpgradeVerdict>;
  private readonly heartbeatMs: number;
  private readonly uploads: WebchatUploads | null;
  /** Created by `start()`: ws loads with the web chat, not with every gateway. */
  private wss: WebSocketServer | null = null;
  private readonly clients = new Set<Client>();
  private readonly live = new LiveTurns();
  /** Per-conversation chain so a user message is stored before the reply it causes. */
  private readonly chains = new Map<string, Promise<unknown>>();
  private readonly deliveredOutbox = new Set<number>();
  /** Arguments of running tool calls, by tool-call id (stored with the call when it ends). */
  private readonly toolArguments = new Map<string, string>();
  private sink: InboundSink | null = null;
  private heartbeat: NodeJS.Timeout | null = null;
  /** Counts starts and stops, so a start that outlived a stop does nothing. */
  private generation = 0;

  constructor(options: WebchatAdapterOptions) {
    this.store = options.store;
    this.logger = options.logger;
    this.authorize = options.authorize;
    this.heartbeatMs = options.heartbeatMs ?? 30_000;
    this.uploads = options.uploads ?? null;
  }

  async start(sink: InboundSink): Promise<void> {
    const generation = ++this.generation;
    const { createSocketServer } = await import("./socket-server.js");
    // A stop (or another start) that came while ws loaded wins: this start is over.
    if (generation !== this.generation) return;
    this.wss ??= createSocketServer({ maxPayload: MAX_FRAME_BYTES, subprotocol: SUBPROTOCOL });
    this.sink = sink;
    this.heartbeat = setInterval(() => this.beat(), this.heartbeatMs);
    this.heartbeat.unref();
  }

  async stop(): Promise<void> {
    this.generation += 1;
    this.sink = null;
    if (this.heartbeat) clearInterval(this.heartbeat);
    this.heartbeat = null;
    const closed = [...this.clients].map(
      (client) =>
        new Promise<void>((resolve) => {
          const timer = setTimeout(() => {
            client.ws.terminate();
            resolve();
          }, 1000);
          client.ws.once("close", () => {
            clearTimeout(timer);
            resolve();
          });
          client.ws.close(1001, "gateway stopping");
        }),
    );
    await Promise.all(closed);
    this.clients.clear();
    this.live.clear();
  }

  readonly status = () => servedStatus(this.sink !== null);

  /**
   * Stores a reply or notice as a durable event of its conversation and pushes it to the
   * pages showing it. Succeeds with no page connected: the page gets it on its next replay.
   */
  async deliver(reply: OutboundReply): Promise<void> {
    const conversationId =
      conversationIdOf(sessionKeyFor(reply.address.chatId)) ?? conversationIdOf(reply.sessionKey);
    if (!conversationId) throw new Error(`not a web chat conversation: ${reply.sessionKey}`);
    await this.serially(conversationId, async () => {
      // A retry in this process after a stored append must not store the reply twice.
      if (this.deliveredOutbox.has(reply.outboxId)) return;
      await this.appendAndBroadcast(conversationId, {
        kind: reply.kind,
        text: reply.text,
        session_id: reply.sessionId,
        outbox_id: reply.outboxId,
        ...(reply.file && {
          file: {
            id: reply.file.id,
            name: reply.file.name,
            mime: reply.file.mime,
            size: reply.file.size,
            url: `/files/${reply.file.id}`,
          },
        }),
        ...(reply.approvalId && { approval_id: reply.approvalId }),
        created_at: Date.now(),
      });
      this.rememberDelivered(reply.outboxId);
    });
  }

  /**
   * An approval was answered (in this chat, from the dashboard or the CLI, or by its timeout):
   * stored as an event of the card's conversation, so the card shows the answer instead of its
   * buttons, after a reload too.
   */
  async approvalAnswered(approvalId: string, text: string, address?: ChatAddress): Promise<void> {
    const conversationId = address && conversationIdOf(sessionKeyFor(address.chatId));
    if (!conversationId) return;
    await this.serially(conversationId, () =>
      this.appendAndBroadcast(conversationId, {
        kind: "approval_answered",
        text,
        session_id: "",
        approval_id: approvalId,
        created_at: Date.now(),
      }),
    ).catch((err: unknown) =>
      this.logger.warn({ err, approval: approvalId }, "approval answer not stored"),
    );
  }

  /** Reads a file the page uploaded (`upload:<id>` references). */
  async fetchFile(attachment: InboundAttachment, maxBytes: number): Promise<Buffer> {
    const uploads = this.uploads;
    if (!uploads || !attachment.ref.startsWith("upload:")) {
      throw new Error("not a file uploaded to this web chat");
    }
    return uploads.read(attachment.ref.slice("upload:".length), maxBytes);
  }

  /** Streams a running turn's progress to the pages showing its conversation (not stored). */
  /** Shows the runner's turns live; a refusal's text reply arrives through the outbox instead. */
  onRunnerEvent(event: RunnerEvent): void {
    if (event.type === "refused") return;
    const { sessionKey, sessionId } = event;
    if (event.type === "turn_end") {
      this.publishTurnEvent({
        sessionKey,
        sessionId,
        event: { type: "turn_end", stopReason: event.stopReason },
      });
    } else if (event.type === "turn_start") {
      this.publishTurnEvent({ sessionKey, sessionId, event: { type: "turn_start" } });
    } else {
      this.publishTurnEvent({ sessionKey, sessionId, event });
    }
  }

  publishTurnEvent(e: PublishedTurnEvent): void {
    const conversationId = conversationIdOf(e.sessionKey);
    if (!conversationId) return;
    this.keepToolCall(conversationId, e);
    const show = () => {
      const frame = this.live.record(toLiveFrame(conversationId, e));
      for (const client of this.clients) {
        const sub = client.subs.get(conversationId);
        // A replaying client gets the running turn as a snapshot once its replay ends.
        if (sub && !sub.replaying) this.send(client, frame);
      }
    };
    // The runner starts a turn as soon as the inbox commits its message, before that message's
    // user event is stored: a live frame waits for the durable events still being stored, so
    // pages get the question before the turn that answers it. With nothing in flight it goes
    // at once (most deltas).
    if (this.chains.has(conversationId)) {
      void this.serially(conversationId, async () => show());
    } else show();
  }

  /**
   * Stores each finished tool call as a durable event of its conversation (in order, before the
   * reply that follows it), so a page loaded later still shows what the agent did.
   */
  private keepToolCall(conversationId: string, e: PublishedTurnEvent): void {
    const event = e.event;
    if (event.type === "tool_start") {
      this.toolArguments.set(event.toolCallId, event.arguments);
      return;
    }
    if (event.type !== "tool_end") return;
    const args = this.toolArguments.get(event.toolCallId) ?? "";
    this.toolArguments.delete(event.toolCallId);
    const tool: StoredToolCall = {
      tool_call_id: event.toolCallId,
      name: event.name,
      arguments: args.slice(0, STORED_TOOL_ARGUMENT_CHARS),
      output: event.output.slice(-STORED_TOOL_OUTPUT_CHARS),
      is_error: event.isError,
    };
    const payload: DurablePayload = {
      kind: "tool",
      text: event.name,
      session_id: e.sessionId,
      tool,
      created_at: Date.now(),
    };
    this.serially(conversationId, () => this.appendAndBroadcast(conversationId, payload)).catch(
      (err: unknown) => this.logger.warn({ err, conversationId }, "tool call not stored"),
    );
  }

  /** Takes over a `GET /ws` upgrade from the HTTP server, or refuses it. */
  handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    const refusal = this.refusalOf(req);
    if (refusal) {
      this.refuse(req, socket, refusal);
      return;
    }
    this.authorize(req).then(
      (verdict) => {
        if (!verdict.ok) {
          this.refuse(req, socket, { ...verdict, reason: "not allowed" });
          return;
        }
        if (socket.destroyed) return;
        // Set by start(), which came before the sink that refusalOf() asked for.
        if (!this.wss) {
          socket.destroy();
          return;
        }
        this.wss.handleUpgrade(req, socket, head, (ws) => this.accept(ws, verdict.operator));
      },
      (err: unknown) => {
        this.logger.error({ err }, "web chat upgrade failed");
        socket.destroy();
      },
    );
  }

  private refusalOf(req: IncomingMessage): { status: string; reason: string } | null {
    const path = (req.url ?? "").split("?")[0];
    if (path !== "/ws") return { status: "404 Not Found", reason: "path" };
    if (!this.sink) return { status: "503 Service Unavailable", reason: "not started" };
    if (!sameOrigin(req)) return { status: "403 Forbidden", reason: "cross-origin" };
    return null;
  }

  private refuse(
    req: IncomingMessage,
    socket: Duplex,
    refusal: { status: string; reason: string; retryAfterSeconds?: number },
  ): void {
    this.logger.warn(
      { reason: refusal.reason, status: refusal.status, origin: req.headers.origin },
      "web chat upgrade refused",
    );
    const retry =
      refusal.retryAfterSeconds !== undefined
        ? `Retry-After: ${refusal.retryAfterSeconds}\r\n`
        : "";
    socket.end(
      `HTTP/1.1 ${refusal.status}\r\nConnection: close\r\n${retry}Content-Length: 0\r\n\r\n`,
    );
    socket.destroy();
  }

  private accept(ws: WebSocket, operator: boolean): void {
    const client: Client = {
      ws,
      subs: new Map(),
      queue: Promise.resolve(),
      alive: true,
      operator,
    };
    this.clients.add(client);
    ws.on("pong", () => {
      client.alive = true;
    });
    ws.on("close", () => this.clients.delete(client));
    ws.on("error", (err) => this.logger.debug({ err }, "web chat socket error"));
    ws.on("message", (data, isBinary) => this.onFrame(client, data, isBinary));
    this.send(client, { type: "hello", protocol: PROTOCOL_VERSION, server_time: Date.now() });
  }

  private onFrame(client: Client, data: RawData, isBinary: boolean): void {
    const parsed = isBinary
      ? ({ ok: false, error: "binary frames are not supported" } as const)
      : parseClientMessage(rawText(data));
    if (!parsed.ok) {
      this.send(client, {
        type: "error",
        code: "bad_request",
        message: parsed.error,
        retryable: false,
      });
      return;
    }
    const message = parsed.message;
    if (message.type === "ping") {
      this.send(client, { type: "pong" });
      return;
    }
    // Frames of one connection run in order: an `open` finishes its replay before the next.
    client.queue = client.queue
      .then(() => this.handle(client, message))
      .catch((err: unknown) => {
        this.logger.error({ err, type: message.type }, "web chat frame failed");
        this.send(client, {
          type: "error",
          code: "internal",
          message: "request failed",
          retryable: true,
        });
      });
  }

  private async handle(client: Client, message: ClientMessage): Promise<void> {
    switch (message.type) {
      case "hello":
        if (message.conversation_id) {
          await this.open(client, message.conversation_id, message.last_seq ?? 0);
        }
        return;
      case "open":
        return this.open(client, message.conversation_id, message.after_seq);
      case "close":
        client.subs.delete(message.conversation_id);
        return;
      case "new": {
        const conversationId = message.conversation_id ?? crypto.randomUUID();
        client.subs.set(conversationId, { lastSent: 0, replaying: false, pending: [] });
        this.send(client, { type: "created", conversation_id: conversationId });
        return;
      }
      case "list":
        this.send(client, {
          type: "conversations",
          conversations: await listConversations(this.store),
        });
        return;
      case "send":
        return this.receive(client, message);
      case "ping":
        return;
    }
  }

  /** Subscribes a client to a conversation and replays its events after `afterSeq`. */
  private async open(client: Client, conversationId: string, afterSeq: number): Promise<void> {
    const sub: Subscription = { lastSent: afterSeq, replaying: true, pending: [] };
    client.subs.set(conversationId, sub);
    const channel = channelFor(conversationId);
    for (;;) {
      const page = await this.store.listChannelEvents(channel, sub.lastSent, REPLAY_PAGE);
      for (const row of page)
        this.sendEvent(client, sub, eventFrame(conversationId, row.seq, row.payload));
      if (page.length < REPLAY_PAGE) break;
    }
    // Events stored while the replay read the store were queued; any not covered go now.
    for (const frame of sub.pending.sort((a, b) => a.seq - b.seq))
      this.sendEvent(client, sub, frame);
    sub.pending = [];
    sub.replaying = false;
    this.send(client, { type: "synced", conversation_id: conversationId, last_seq: sub.lastSent });
    for (const frame of this.live.snapshot(conversationId)) this.send(client, frame);
  }

  /** A user message: committed to the inbox through the sink, then acked. */
  private async receive(client: Client, message: ClientMessage & { type: "send" }): Promise<void> {
    const sink = this.sink;
    const { conversation_id: conversationId, client_id: clientId } = message;
    if (!sink) {
      this.send(client, sendError(clientId, "not_ready", "the gateway is not accepting messages"));
      return;
    }
    if (!client.subs.has(conversationId)) {
      client.subs.set(conversationId, { lastSent: 0, replaying: false, pending: [] });
    }
    try {
      await this.serially(conversationId, async () => {
        const result = await sink.receive({
          platform: this.name,
          chatId: conversationId,
          platformMessageId: clientId,
          sessionKey: sessionKeyFor(conversationId),
          text: message.text,
          address: { platform: this.name, chatId: conversationId },
          ...(client.operator && { operator: true }),
          ...(message.attachments && { attachments: message.attachments.map(toAttachment) }),
        });
        // A resend of a stored message is acked again but not stored twice.
        const seq = result.accepted
          ? await this.appendAndBroadcast(conversationId, {
              kind: "user",
              text: message.text,
              session_id: result.sessionId,
              client_id: clientId,
              ...(message.attachments && {
                attachments: message.attachments.map(({ name, mime }) => ({ name, mime })),
              }),
              created_at: Date.now(),
            })
          : null;
        this.send(client, {
          type: "ack",
          conversation_id: conversationId,
          client_id: clientId,
          seq,
          duplicate: !result.accepted,
        });
      });
    } catch (err) {
      this.logger.warn({ err, conversationId }, "web chat message not accepted");
      this.send(client, sendError(clientId, "not_accepted", errorText(err)));
    }
  }

  private async appendAndBroadcast(
    conversationId: string,
    payload: DurablePayload,
  ): Promise<number> {
    const seq = await this.store.appendChannelEvent(channelFor(conversationId), payload);
    const frame = eventFrame(conversationId, seq, payload);
    for (const client of this.clients) {
      const sub = client.subs.get(conversationId);
      if (!sub) continue;
      if (sub.replaying) sub.pending.push(frame);
      else this.sendEvent(client, sub, frame);
    }
    return seq;
  }

  private sendEvent(
    client: Client,
    sub: Subscription,
    frame: ServerMessage & { type: "event" },
  ): void {
    if (frame.seq <= sub.lastSent) return;
    sub.lastSent = frame.seq;
    this.send(client, frame);
  }

  private serially<T>(conversationId: string, task: () => Promise<T>): Promise<T> {
    const previous = this.chains.get(conversationId) ?? Promise.resolve();
    const run = previous.then(task, task);
    const settled = run.then(
      () => undefined,
      () => undefined,
    );
    this.chains.set(conversationId, settled);
    void settled.then(() => {
      if (this.chains.get(conversationId) === settled) this.chains.delete(conversationId);
    });
    return run;
  }

  private rememberDelivered(outboxId: number): void {
    this.deliveredOutbox.add(outboxId);
    if (this.deliveredOutbox.size > REMEMBERED_OUTBOX_IDS) {
      const oldest = this.deliveredOutbox.values().next().value;
      if (oldest !== undefined) this.deliveredOutbox.delete(oldest);
    }
  }

  private beat(): void {
    for (const client of this.clients) {
      if (!client.alive) {
        client.ws.terminate();
        continue;
      }
      client.alive = false;
      client.ws.ping();
    }
  }

  private send(client: Client, message: ServerMessage): void {
    if (client.ws.readyState === client.ws.OPEN) client.ws.send(JSON.stringify(message));
  }
}

function rawText(data: RawData): string {
  if (Array.isArray(data)) return Buffer.concat(data).toString("utf8");
  if (data instanceof ArrayBuffer) return Buffer.from(data).toString("utf8");
  return data.toString("utf8");
}

function sendError(clientId: string, code: string, message: string): ServerMessage {
  return { type: "error", code, message, client_id: clientId, retryable: true };
}

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** A page's attachment as the runner sees it: images as photos, audio as audio, else documents. */
function toAttachment(a: SentAttachment): InboundAttachment {
  const kind = /^image\//.test(a.mime) ? "photo" : /^audio\//.test(a.mime) ? "audio" : "document";
  return {
    kind,
    ref: `upload:${a.upload_id}`,
    name: a.name,
    ...(a.mime && { mime: a.mime }),
    size: a.size,
  };
}
