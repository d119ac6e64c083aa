/**
 * A stand-in Slack on a real loopback socket: the Web API methods Keel calls (`auth.test`,
 * `apps.connections.open`, `chat.postMessage`, `chat.update` (keeps each message's `earlier`
 * texts), `chat.delete`, `conversations.history`, `conversations.replies`)
 * under `<apiRoot>`, and a Socket Mode WebSocket that says `hello`, sends `events_api` envelopes
 * and records acknowledgements. Point the real SDKs at it with `slackApiUrl: fake.apiRoot`; the
 * socket URL comes from `apps.connections.open`, as with Slack.
 *
 * Slack's delivery model as Keel depends on it: an envelope that was not acknowledged is delivered
 * again (with `retry_attempt` + 1) on the next connection that opens, or when the test calls
 * `redeliverUnacked()`. One user post in a channel that mentions the bot arrives twice, as
 * `message` and as `app_mention`, with different event ids and the same channel and `ts`.
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { type WebSocket, WebSocketServer } from "ws";

export const BOT_USER_ID = "UKEELBOT";
export const BOT_ID = "BKEELBOT";
export const TEAM_ID = "TKEEL";

/** A message in a conversation, as `conversations.history` would list it. */
export interface SlackMessage {
  channel: string;
  ts: string;
  thread_ts?: string;
  user: string;
  bot_id?: string;
  text: string;
  metadata?: { event_type: string; event_payload: Record<string, unknown> };
  /** The texts it showed before each `chat.update`, oldest first. */
  earlier?: string[];
}

/** One Web API call, in arrival order. */
export interface ApiCall {
  method: string;
  args: Record<string, unknown>;
  /** What the fake did: answered, answered with an error, or dropped the connection. */
  outcome: "ok" | "error" | "rate_limited" | "dropped";
  /** When it arrived (epoch ms). */
  at: number;
}

/** A fault for the next call(s) of a method. */
export type ApiFault =
  | { kind: "rate_limited"; retryAfter: number }
  | { kind: "error"; error: string }
  /** Carries the call out (the message is posted), then drops the connection unanswered. */
  | { kind: "drop_after" }
  /** Drops the connection without doing anything. */
  | { kind: "drop_before" };

export interface EnvelopeRecord {
  envelopeId: string;
  eventId: string;
  event: Record<string, unknown>;
  /** Deliveries so far (1 = first delivery). */
  deliveries: number;
  acked: boolean;
}

export interface UserPostInput {
  channel: string;
  user: string;
  text: string;
  /** `im` for a DM (default for `D…` channels), `channel` otherwise. */
  channelType?: "im" | "channel" | "group" | "mpim";
  threadTs?: string;
  /** Send the `app_mention` twin too (default: when the text mentions the bot outside a DM). */
  twin?: boolean;
  /** Leave out the `message` event (only `app_mention` arrives). */
  onlyMention?: boolean;
}

export interface FakeSlackOptions {
  appToken?: string;
  botToken?: string;
}

/** What a new socket connection gets first (default `hello`). */
export type ConnectionGreeting = "hello" | "nothing";

export interface FakeSlack {
  /** For `WebClient`'s `slackApiUrl`, e.g. `http://127.0.0.1:40123/api/`. */
  apiRoot: string;
  appToken: string;
  botToken: string;
  calls: ApiCall[];
  envelopes: EnvelopeRecord[];
  /** Sockets opened so far (each after a fresh `apps.connections.open`). */
  connectionsOpened(): number;
  /** Connections that said hello and are still open. */
  openConnections(): number;
  /** A user writes a message: stored in the conversation and sent as event(s). Returns its ts. */
  userPosts(input: UserPostInput): string;
  /** Sends any event in an envelope to an open connection (queued until one opens). */
  sendEvent(event: Record<string, unknown>): EnvelopeRecord;
  /** Delivers every unacknowledged envelope again. */
  redeliverUnacked(): void;
  /** Faults for the next calls of `method`, one per call, in order. */
  fail(method: string, ...faults: ApiFault[]): void;
  /** Asks every open socket to reconnect (`disconnect` / `refresh_requested`). */
  requestRefresh(): void;
  /** How the next connections are greeted (`nothing`: a socket that never says hello). */
  greetWith(greeting: ConnectionGreeting): void;
  /** Cuts every open socket without a close frame (the client sees 1006). */
  dropSockets(): void;
  /**
   * The open sockets go half-open: they stay up but answer no ping and carry no event (events
   * wait for the next connection). Later connections are healthy.
   */
  stall(): void;
  /** Calls `listener` with every Web API call once it was answered; returns an unsubscribe. */
  onCall(listener: (call: ApiCall, answer: Record<string, unknown>) => void): () => void;
  /** Messages of a channel (a thread's replies included), oldest first. */
  messages(channel: string): SlackMessage[];
  /** The bot's messages in a channel (optionally one thread), oldest first. */
  botMessages(channel: string, threadTs?: string): SlackMessage[];
  close(): Promise<void>;
}

interface Connection {
  socket: WebSocket;
  id: number;
}

/** Slack's `ts`: seconds and a sequence, increasing. */
function makeTs(seq: number): string {
  return `${Math.floor(Date.now() / 1000)}.${String(seq).padStart(6, "0")}`;
}

async function readBody(req: IncomingMessage): Promise<Record<string, unknown>> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  const raw = Buffer.concat(chunks).toString("utf8");
  if ((req.headers["content-type"] ?? "").includes("application/json")) {
    return raw ? (JSON.parse(raw) as Record<string, unknown>) : {};
  }
  const args: Record<string, unknown> = {};
  for (const [key, value] of new URLSearchParams(raw)) {
    // The SDK JSON-encodes objects (metadata) inside the form.
    args[key] = /^[[{]/.test(value) ? JSON.parse(value) : value;
  }
  return args;
}

export async function startFakeSlack(options: FakeSlackOptions = {}): Promise<FakeSlack> {
  const appToken = options.appToken ?? "xapp-1-fake";
  const botToken = options.botToken ?? "xoxb-fake";
  const calls: ApiCall[] = [];
  const envelopes: EnvelopeRecord[] = [];
  const conversation: SlackMessage[] = [];
  const faults = new Map<string, ApiFault[]>();
  const connections = new Set<Connection>();
  const listeners = new Set<(call: ApiCall, answer: Record<string, unknown>) => void>();
  const sockets = new Set<Socket>();
  /** Envelopes waiting for a connection to open. */
  const waiting: EnvelopeRecord[] = [];
  let seq = 0;
  let opened = 0;
  let greeting: ConnectionGreeting = "hello";
  const mute = new Set<WebSocket>();
  let port = 0;

  // Pongs are answered by hand, so that a stalled socket can stop answering them.
  const wss = new WebSocketServer({ noServer: true, autoPong: false });
  const stalled = new WeakSet<WebSocket>();

  function deliver(record: EnvelopeRecord): void {
    const [connection] = [...connections];
    if (!connection) {
      if (!waiting.includes(record)) waiting.push(record);
      return;
    }
    record.deliveries += 1;
    connection.socket.send(
      JSON.stringify({
        envelope_id: record.envelopeId,
        type: "events_api",
        accepts_response_payload: false,
        retry_attempt: record.deliveries - 1,
        retry_reason: record.deliveries > 1 ? "timeout" : "",
        payload: {
          type: "event_callback",
          team_id: TEAM_ID,
          event_id: record.eventId,
          event_time: Math.floor(Date.now() / 1000),
          event: record.event,
        },
      }),
    );
  }

  function sendEvent(event: Record<string, unknown>): EnvelopeRecord {
    seq += 1;
    const record: EnvelopeRecord = {
      envelopeId: `env-${seq}`,
      eventId: `Ev${String(seq).padStart(8, "0")}`,
      event,
      deliveries: 0,
      acked: false,
    };
    envelopes.push(record);
    deliver(record);
    return record;
  }

  function redeliverUnacked(): void {
    for (const record of envelopes) {
      if (!record.acked && !waiting.includes(record)) deliver(record);
    }
  }

  wss.on("connection", (socket: WebSocket) => {
    opened += 1;
    const connection = { socket, id: opened };
    if (greeting === "nothing") {
      // Never says hello, never carries events; kept only to be closed.
      mute.add(socket);
      socket.on("close", () => mute.delete(socket));
      return;
    }
    connections.add(connection);
    socket.on("ping", (data) => {
      if (!stalled.has(socket)) socket.pong(data);
    });
    socket.on("message", (data) => {
      try {
        const frame = JSON.parse(String(data)) as { envelope_id?: string };
        const record = envelopes.find((e) => e.envelopeId === frame.envelope_id);
        if (record) record.acked = true;
      } catch {
        // Not an ack: ignored, as Slack would.
      }
    });
    socket.on("close", () => connections.delete(connection));
    socket.send(
      JSON.stringify({
        type: "hello",
        num_connections: connections.size,
        connection_info: { app_id: "AKEEL" },
        debug_info: { host: "fake-slack", approximate_connection_time: 3600 },
      }),
    );
    // Slack redelivers what no connection acknowledged; envelopes sent while none was open wait.
    const unacked = envelopes.filter((e) => !e.acked && e.deliveries > 0);
    for (const record of waiting.splice(0)) deliver(record);
    for (const record of unacked) deliver(record);
  });

  function answer(res: ServerResponse, body: Record<string, unknown>): void {
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify(body));
  }

  function bearer(req: IncomingMessage, args: Record<string, unknown>): string {
    const header = req.headers.authorization ?? "";
    return header.startsWith("Bearer ") ? header.slice(7) : String(args.token ?? "");
  }

  function listed(messages: SlackMessage[], args: Record<string, unknown>): SlackMessage[] {
    const withMeta = String(args.include_all_metadata) === "true";
    const oldest = args.oldest === undefined ? 0 : Number(args.oldest);
    return messages
      .filter((m) => Number(m.ts) > oldest)
      .map((m) => {
        if (withMeta) return m;
        const { metadata: _hidden, ...rest } = m;
        return rest;
      });
  }

  /** One page of `list` from the cursor (an offset). */
  function page(list: SlackMessage[], args: Record<string, unknown>): Record<string, unknown> {
    const limit = Math.min(Number(args.limit ?? 100) || 100, 1000);
    const start = Number(args.cursor ?? 0) || 0;
    const next = start + limit < list.length ? String(start + limit) : "";
    return {
      ok: true,
      messages: list.slice(start, start + limit),
      has_more: next !== "",
      response_metadata: { next_cursor: next },
    };
  }

  function handle(method: string, args: Record<string, unknown>, token: string) {
    switch (method) {
      case "apps.connections.open":
        if (token !== appToken) return { ok: false, error: "invalid_auth" };
        return { ok: true, url: `ws://127.0.0.1:${port}/link/?ticket=${opened + 1}` };
      case "auth.test":
        if (token !== botToken) return { ok: false, error: "invalid_auth" };
        return {
          ok: true,
          url: "https://keel-fake.slack.com/",
          team: "Keel",
          user: "keel",
          team_id: TEAM_ID,
          user_id: BOT_USER_ID,
          bot_id: BOT_ID,
        };
      case "chat.postMessage": {
        if (token !== botToken) return { ok: false, error: "invalid_auth" };
        const channel = String(args.channel ?? "");
        const text = String(args.text ?? "");
        if (!channel) return { ok: false, error: "channel_not_found" };
        if (!text) return { ok: false, error: "no_text" };
        if (text.length > 40_000) return { ok: false, error: "msg_too_long" };
        seq += 1;
        const message: SlackMessage = {
          channel,
          ts: makeTs(seq),
          user: BOT_USER_ID,
          bot_id: BOT_ID,
          text,
          ...(args.thread_ts !== undefined ? { thread_ts: String(args.thread_ts) } : {}),
          ...(args.metadata !== undefined
            ? { metadata: args.metadata as SlackMessage["metadata"] }
            : {}),
        };
        conversation.push(message);
        return { ok: true, channel, ts: message.ts, message };
      }
      case "chat.update": {
        if (token !== botToken) return { ok: false, error: "invalid_auth" };
        const channel = String(args.channel ?? "");
        const text = String(args.text ?? "");
        const message = conversation.find(
          (m) => m.channel === channel && m.ts === String(args.ts ?? ""),
        );
        if (!message) return { ok: false, error: "message_not_found" };
        if (message.user !== BOT_USER_ID) return { ok: false, error: "cant_update_message" };
        if (!text) return { ok: false, error: "no_text" };
        if (text.length > 40_000) return { ok: false, error: "msg_too_long" };
        message.earlier = [...(message.earlier ?? []), message.text];
        message.text = text;
        return { ok: true, channel, ts: message.ts, text };
      }
      case "chat.delete": {
        if (token !== botToken) return { ok: false, error: "invalid_auth" };
        const channel = String(args.channel ?? "");
        const at = conversation.findIndex(
          (m) => m.channel === channel && m.ts === String(args.ts ?? ""),
        );
        if (at < 0) return { ok: false, error: "message_not_found" };
        if (conversation[at]!.user !== BOT_USER_ID) {
          return { ok: false, error: "cant_delete_message" };
        }
        conversation.splice(at, 1);
        return { ok: true, channel, ts: String(args.ts) };
      }
      case "conversations.history": {
        if (token !== botToken) return { ok: false, error: "invalid_auth" };
        const channel = String(args.channel ?? "");
        // Newest first; thread replies stay out of the channel's history.
        const top = conversation.filter(
          (m) => m.channel === channel && (m.thread_ts === undefined || m.thread_ts === m.ts),
        );
        return page(listed(top, args).reverse(), args);
      }
      case "conversations.replies": {
        if (token !== botToken) return { ok: false, error: "invalid_auth" };
        const channel = String(args.channel ?? "");
        const root = String(args.ts ?? "");
        const thread = conversation.filter(
          (m) => m.channel === channel && (m.ts === root || m.thread_ts === root),
        );
        return page(listed(thread, args), args);
      }
      default:
        return { ok: false, error: "unknown_method" };
    }
  }

  const server = createServer((req, res) => {
    const match = /^\/api\/([a-zA-Z.]+)$/.exec((req.url ?? "").split("?")[0] ?? "");
    if (!match || req.method !== "POST") {
      res.writeHead(404).end();
      return;
    }
    const method = match[1]!;
    readBody(req)
      .then((args) => {
        const fault = faults.get(method)?.shift();
        const token = bearer(req, args);
        const at = Date.now();
        if (fault?.kind === "drop_before") {
          calls.push({ method, args, outcome: "dropped", at });
          req.socket.destroy();
          return;
        }
        if (fault?.kind === "rate_limited") {
          calls.push({ method, args, outcome: "rate_limited", at });
          res.writeHead(429, { "retry-after": String(fault.retryAfter) });
          res.end(JSON.stringify({ ok: false, error: "ratelimited" }));
          return;
        }
        if (fault?.kind === "error") {
          calls.push({ method, args, outcome: "error", at });
          answer(res, { ok: false, error: fault.error });
          return;
        }
        const body = handle(method, args, token);
        if (fault?.kind === "drop_after") {
          calls.push({ method, args, outcome: "dropped", at });
          req.socket.destroy();
          return;
        }
        const call: ApiCall = { method, args, outcome: body.ok ? "ok" : "error", at };
        calls.push(call);
        answer(res, body);
        for (const listener of listeners) listener(call, body);
      })
      .catch(() => {
        res.writeHead(400).end();
      });
  });
  server.on("connection", (socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
  });
  server.on("upgrade", (req, socket, head) => {
    if (!(req.url ?? "").startsWith("/link/")) {
      socket.destroy();
      return;
    }
    wss.handleUpgrade(req, socket, head, (ws) => wss.emit("connection", ws, req));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  port = (server.address() as AddressInfo).port;

  return {
    apiRoot: `http://127.0.0.1:${port}/api/`,
    appToken,
    botToken,
    calls,
    envelopes,
    connectionsOpened: () => opened,
    openConnections: () => connections.size,
    userPosts(input) {
      seq += 1;
      const ts = makeTs(seq);
      const direct = input.channelType === "im" || input.channel.startsWith("D");
      const channelType = input.channelType ?? (direct ? "im" : "channel");
      conversation.push({
        channel: input.channel,
        ts,
        user: input.user,
        text: input.text,
        ...(input.threadTs !== undefined ? { thread_ts: input.threadTs } : {}),
      });
      const base = {
        user: input.user,
        text: input.text,
        ts,
        channel: input.channel,
        event_ts: ts,
        ...(input.threadTs !== undefined ? { thread_ts: input.threadTs } : {}),
      };
      if (!input.onlyMention) sendEvent({ type: "message", channel_type: channelType, ...base });
      const mentioned = input.text.includes(`<@${BOT_USER_ID}>`);
      if (input.twin ?? (mentioned && channelType !== "im"))
        sendEvent({ type: "app_mention", ...base });
      return ts;
    },
    sendEvent,
    redeliverUnacked,
    fail(method, ...list) {
      faults.set(method, [...(faults.get(method) ?? []), ...list]);
    },
    requestRefresh() {
      for (const { socket } of connections) {
        socket.send(
          JSON.stringify({
            type: "disconnect",
            reason: "refresh_requested",
            debug_info: { host: "fake" },
          }),
        );
      }
    },
    greetWith(next) {
      greeting = next;
    },
    dropSockets() {
      for (const { socket } of connections) socket.terminate();
    },
    stall() {
      for (const connection of [...connections]) {
        stalled.add(connection.socket);
        connections.delete(connection);
        mute.add(connection.socket);
      }
    },
    onCall(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    messages: (channel) => conversation.filter((m) => m.channel === channel),
    botMessages: (channel, threadTs) =>
      conversation.filter(
        (m) =>
          m.channel === channel &&
          m.user === BOT_USER_ID &&
          (threadTs === undefined || m.thread_ts === threadTs),
      ),
    async close() {
      for (const { socket } of connections) socket.terminate();
      for (const socket of mute) socket.terminate();
      wss.close();
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
