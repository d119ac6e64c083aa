/**
 * A stand-in Discord on a real loopback socket: the REST routes Keel uses under `/api/v10` and a
 * WebSocket gateway that speaks the gateway protocol (HELLO, IDENTIFY → READY with `session_id`
 * and `resume_gateway_url`, dispatches with `s`, HEARTBEAT/ACK, RESUME → replay + RESUMED, INVALID
 * SESSION, close codes). Point @discordjs/rest at `apiRoot`; the gateway URL is what
 * `GET /api/v10/gateway/bot` answers, so @discordjs/ws follows it there.
 *
 * Discord's own behaviours the tests depend on are modelled: events sent while the bot is
 * disconnected are kept in the session and replayed on RESUME; an invalidated session answers
 * RESUME with op 9 `false`; `enforce_nonce` returns the message already created with that nonce.
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { type WebSocket, WebSocketServer } from "ws";

const DISCORD_EPOCH = 1_420_070_400_000n;

export interface FakeUser {
  id: string;
  username: string;
}

export interface FakeMessage {
  id: string;
  channel_id: string;
  guild_id?: string;
  author: FakeUser & { bot?: boolean };
  content: string;
  type: number;
  mentions: FakeUser[];
  nonce?: string;
  message_reference?: { message_id: string };
  timestamp: string;
  webhook_id?: string;
  /** The texts it showed before each edit, oldest first. */
  earlier?: string[];
}

interface FakeChannel {
  id: string;
  type: number;
  guild_id?: string;
  parent_id?: string;
  messages: FakeMessage[];
}

interface GatewayEvent {
  s: number;
  t: string;
  d: unknown;
}

interface GatewaySession {
  id: string;
  events: GatewayEvent[];
  seq: number;
  socket: WebSocket | null;
  valid: boolean;
}

/** One gateway payload the bot sent (op 2 identify, op 6 resume, op 1 heartbeat ...). */
export interface GatewayReceived {
  op: number;
  d: unknown;
  at: number;
}

export interface FakeDiscordOptions {
  token: string;
  /** HELLO's heartbeat interval (ms). */
  heartbeatIntervalMs?: number;
}

export interface FakeDiscord {
  readonly apiRoot: string;
  readonly gatewayUrl: string;
  readonly bot: FakeUser;
  readonly guildId: string;
  /** Every gateway payload the bot sent, in order. */
  readonly received: GatewayReceived[];
  /** Sockets the bot opened to the gateway. */
  connections(): number;
  identifies(): GatewayReceived[];
  resumes(): { session_id: string; seq: number }[];
  /** Session ids READY handed out, oldest first. */
  sessionIds(): string[];
  createGuildChannel(): string;
  /** The DM channel between the bot and `userId` (created once). */
  dmChannel(userId: string): string;
  /**
   * A user posts a message: it is stored in the channel and dispatched as MESSAGE_CREATE to the
   * current session (queued for replay while the bot is disconnected; lost with the session when
   * that was invalidated).
   */
  userSends(input: {
    channelId: string;
    user: FakeUser;
    content: string;
    mentionBot?: boolean;
  }): FakeMessage;
  /**
   * Dispatches a user's message again (MESSAGE_CREATE with a new sequence), as Discord's replay
   * after a RESUME does for an event the bot had already seen.
   */
  redeliver(message: FakeMessage): void;
  /** The sequence number MESSAGE_CREATE first carried `messageId` with, in the current session. */
  sequenceOf(messageId: string): number | null;
  /** Calls `listener` with every message the bot creates; returns an unsubscribe. */
  onBotMessage(listener: (message: FakeMessage) => void): () => void;
  /** Messages the bot created in a channel, oldest first. */
  botMessages(channelId: string): FakeMessage[];
  /** Every bot message in every channel. */
  allBotMessages(): FakeMessage[];
  channel(channelId: string): { type: number; parent_id?: string } | undefined;
  /** REST requests as `METHOD path`, in order. */
  readonly requests: string[];
  /** The same requests with their arrival time (epoch ms) and the status answered. */
  readonly requestLog: { method: string; path: string; at: number; status?: number }[];
  /** The next `count` message edits (PATCH) are answered 429 with `retry_after` seconds. */
  failEdits(count: number, retryAfterSec: number): void;
  /** A user runs a slash command: INTERACTION_CREATE to the current session. */
  userInvokes(input: { channelId: string; user: FakeUser; name: string }): { id: string };
  /** Interaction responses the bot sent, in order. */
  interactionCallbacks(): { interactionId: string; body: Record<string, unknown> }[];
  /** The slash commands the bot registered last (names). */
  registeredCommands(): string[];
  /** Closes every gateway socket without a close frame (the bot sees 1006). */
  dropConnections(): void;
  /** Sends op 7 RECONNECT on every open socket (the bot should reconnect and resume). */
  requestReconnect(): void;
  /** Closes every gateway socket with `code`. */
  closeConnections(code: number): void;
  /** The open sockets stop answering heartbeats and stop receiving events (half-open). */
  stall(): void;
  /** Forgets every session: RESUME gets op 9 `false`, events sent meanwhile are not replayed. */
  invalidateSessions(): void;
  /**
   * The next `count` message creates are stored but answered 500 (a lost response), or answered
   * 429 with `retry_after` seconds without being stored.
   */
  failSends(count: number, mode: "500-after-create" | "429", retryAfterSec?: number): void;
  close(): Promise<void>;
}

export async function startFakeDiscord(options: FakeDiscordOptions): Promise<FakeDiscord> {
  const heartbeatIntervalMs = options.heartbeatIntervalMs ?? 45_000;
  // Snowflakes carry their creation time (as Discord's do) and strictly increase.
  let last = 0n;
  const snowflake = () => {
    last = [(BigInt(Date.now()) - DISCORD_EPOCH) << 22n, last + 1n].reduce((a, b) =>
      a > b ? a : b,
    );
    return last.toString();
  };
  const bot: FakeUser & { bot: true } = { id: snowflake(), username: "keel-bot", bot: true };
  const guildId = snowflake();
  const channels = new Map<string, FakeChannel>();
  const dms = new Map<string, string>();
  const sessions = new Map<string, GatewaySession>();
  let currentSession: GatewaySession | null = null;
  const sockets = new Set<WebSocket>();
  const stalled = new WeakSet<WebSocket>();
  const received: GatewayReceived[] = [];
  const requests: string[] = [];
  const readyIds: string[] = [];
  let connectionCount = 0;
  const callbacks: { interactionId: string; body: Record<string, unknown> }[] = [];
  let commands: string[] = [];
  const botListeners = new Set<(message: FakeMessage) => void>();
  const sendFailures: { mode: "500-after-create" | "429"; retryAfterSec: number }[] = [];
  const editFailures: number[] = [];
  const requestLog: { method: string; path: string; at: number; status?: number }[] = [];

  const server = createServer((req, res) => {
    handleRest(req, res).catch((err: unknown) => {
      res.writeHead(500, { "content-type": "application/json" });
      res.end(JSON.stringify({ message: String(err), code: 0 }));
    });
  });
  const wss = new WebSocketServer({ server });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;
  const apiRoot = `http://127.0.0.1:${port}/api`;
  const gatewayUrl = `ws://127.0.0.1:${port}/gateway`;

  function send(socket: WebSocket, payload: unknown): void {
    if (socket.readyState === socket.OPEN && !stalled.has(socket)) {
      socket.send(JSON.stringify(payload));
    }
  }

  function dispatch(t: string, d: unknown): void {
    const session = currentSession;
    if (!session?.valid) return;
    const event = { s: ++session.seq, t, d };
    session.events.push(event);
    if (session.socket) send(session.socket, { op: 0, ...event });
  }

  wss.on("connection", (socket) => {
    connectionCount += 1;
    sockets.add(socket);
    socket.on("close", () => {
      sockets.delete(socket);
      for (const session of sessions.values()) {
        if (session.socket === socket) session.socket = null;
      }
    });
    send(socket, { op: 10, d: { heartbeat_interval: heartbeatIntervalMs } });
    socket.on("message", (raw) => {
      const payload = JSON.parse(String(raw)) as { op: number; d: Record<string, unknown> };
      received.push({ op: payload.op, d: payload.d, at: Date.now() });
      switch (payload.op) {
        case 1:
          send(socket, { op: 11 });
          return;
        case 2:
          return identify(socket, payload.d);
        case 6:
          return resume(socket, payload.d);
        default:
          return;
      }
    });
  });

  function identify(socket: WebSocket, d: Record<string, unknown>): void {
    if (d.token !== options.token) {
      socket.close(4004, "Authentication failed");
      return;
    }
    if (currentSession?.socket === socket) {
      socket.close(4005, "Already authenticated");
      return;
    }
    const session: GatewaySession = {
      id: `sess-${snowflake()}`,
      events: [],
      seq: 0,
      socket,
      valid: true,
    };
    sessions.set(session.id, session);
    currentSession = session;
    readyIds.push(session.id);
    dispatch("READY", {
      v: 10,
      user: bot,
      guilds: [{ id: guildId, unavailable: true }],
      session_id: session.id,
      resume_gateway_url: `ws://127.0.0.1:${port}/resume`,
      shard: [0, 1],
      application: { id: bot.id, flags: 0 },
    });
  }

  function resume(socket: WebSocket, d: Record<string, unknown>): void {
    const session = sessions.get(String(d.session_id));
    if (d.token !== options.token || !session?.valid) {
      send(socket, { op: 9, d: false });
      return;
    }
    if (session.socket && session.socket !== socket) session.socket.terminate();
    session.socket = socket;
    currentSession = session;
    const seq = Number(d.seq);
    for (const event of session.events) {
      if (event.s > seq) send(socket, { op: 0, ...event });
    }
    send(socket, { op: 0, s: null, t: "RESUMED", d: {} });
  }

  function json(res: ServerResponse, status: number, body: unknown): void {
    res.writeHead(status, { "content-type": "application/json" });
    res.end(JSON.stringify(body));
  }

  async function readBody(req: IncomingMessage): Promise<Record<string, unknown>> {
    let raw = "";
    for await (const chunk of req) raw += chunk;
    return raw ? (JSON.parse(raw) as Record<string, unknown>) : {};
  }

  function channelView(c: FakeChannel) {
    return {
      id: c.id,
      type: c.type,
      ...(c.guild_id && { guild_id: c.guild_id }),
      ...(c.parent_id && { parent_id: c.parent_id }),
      name: `channel-${c.id}`,
    };
  }

  async function handleRest(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? "/", "http://x");
    const path = url.pathname.replace(/^\/api\/v10/, "");
    requests.push(`${req.method} ${path}`);
    const logged: (typeof requestLog)[number] = { method: req.method ?? "", path, at: Date.now() };
    requestLog.push(logged);
    res.on("finish", () => {
      logged.status = res.statusCode;
    });
    const callback = /^\/interactions\/(\d+)\/([^/]+)\/callback$/.exec(path);
    if (callback && req.method === "POST") {
      // Interaction responses authenticate with the interaction's token, not the bot's.
      callbacks.push({ interactionId: callback[1]!, body: await readBody(req) });
      res.writeHead(204).end();
      return;
    }
    if (req.headers.authorization !== `Bot ${options.token}`) {
      return json(res, 401, { message: "401: Unauthorized", code: 0 });
    }
    if (req.method === "GET" && path === "/gateway/bot") {
      return json(res, 200, {
        url: gatewayUrl,
        shards: 1,
        session_start_limit: {
          total: 1000,
          remaining: 999,
          reset_after: 60_000,
          max_concurrency: 1,
        },
      });
    }
    if (req.method === "GET" && path === "/users/@me") return json(res, 200, bot);
    if (req.method === "PUT" && path === `/applications/${bot.id}/commands`) {
      const body = (await readBody(req)) as unknown as { name: string }[];
      commands = body.map((c) => c.name);
      return json(res, 200, body);
    }
    let match = /^\/channels\/(\d+)$/.exec(path);
    if (match && req.method === "GET") {
      const c = channels.get(match[1]!);
      return c
        ? json(res, 200, channelView(c))
        : json(res, 404, { message: "Unknown Channel", code: 10003 });
    }
    match = /^\/channels\/(\d+)\/typing$/.exec(path);
    if (match && req.method === "POST") {
      res.writeHead(204).end();
      return;
    }
    match = /^\/channels\/(\d+)\/messages\/(\d+)\/threads$/.exec(path);
    if (match && req.method === "POST") {
      const [, parentId, messageId] = match as unknown as [string, string, string];
      await readBody(req);
      if (channels.has(messageId)) {
        return json(res, 400, {
          message: "A thread has already been created for this message",
          code: 160004,
        });
      }
      const parent = channels.get(parentId);
      if (!parent) return json(res, 404, { message: "Unknown Channel", code: 10003 });
      const thread: FakeChannel = {
        id: messageId,
        type: 11,
        parent_id: parentId,
        messages: [],
        ...(parent.guild_id && { guild_id: parent.guild_id }),
      };
      channels.set(messageId, thread);
      dispatch("THREAD_CREATE", channelView(thread));
      return json(res, 201, channelView(thread));
    }
    match = /^\/channels\/(\d+)\/messages\/(\d+)$/.exec(path);
    if (match && (req.method === "PATCH" || req.method === "DELETE")) {
      const body = await readBody(req);
      const c = channels.get(match[1]!);
      if (!c) return json(res, 404, { message: "Unknown Channel", code: 10003 });
      const at = c.messages.findIndex((m) => m.id === match![2]);
      const message = c.messages[at];
      if (!message) return json(res, 404, { message: "Unknown Message", code: 10008 });
      if (message.author.id !== bot.id) {
        return json(res, 403, {
          message: "Cannot edit a message authored by another user",
          code: 50005,
        });
      }
      if (req.method === "DELETE") {
        c.messages.splice(at, 1);
        res.writeHead(204).end();
        return;
      }
      const retryAfterSec = editFailures.shift();
      if (retryAfterSec !== undefined) return rateLimited(res, retryAfterSec);
      if (typeof body.content === "string") {
        message.earlier = [...(message.earlier ?? []), message.content];
        message.content = body.content;
      }
      return json(res, 200, message);
    }
    match = /^\/channels\/(\d+)\/messages$/.exec(path);
    if (match) {
      const c = channels.get(match[1]!);
      if (!c) return json(res, 404, { message: "Unknown Channel", code: 10003 });
      if (req.method === "GET") {
        const after = url.searchParams.get("after");
        const limit = Number(url.searchParams.get("limit") ?? 50);
        const later = c.messages.filter((m) => after === null || BigInt(m.id) > BigInt(after));
        return json(res, 200, later.slice(0, limit).reverse());
      }
      if (req.method === "POST") return createBotMessage(c, await readBody(req), res);
    }
    return json(res, 404, { message: "404: Not Found", code: 0 });
  }

  function createBotMessage(
    c: FakeChannel,
    body: Record<string, unknown>,
    res: ServerResponse,
  ): void {
    const failure = sendFailures.shift();
    if (failure?.mode === "429") {
      rateLimited(res, failure.retryAfterSec);
      return;
    }
    const nonce = typeof body.nonce === "string" ? body.nonce : undefined;
    if (nonce !== undefined && body.enforce_nonce === true) {
      const existing = c.messages.find((m) => m.author.id === bot.id && m.nonce === nonce);
      if (existing) {
        json(res, 200, existing);
        return;
      }
    }
    const reference = body.message_reference as { message_id?: string } | undefined;
    const message: FakeMessage = {
      id: snowflake(),
      channel_id: c.id,
      ...(c.guild_id && { guild_id: c.guild_id }),
      author: bot,
      content: String(body.content ?? ""),
      type: reference?.message_id ? 19 : 0,
      mentions: [],
      timestamp: new Date().toISOString(),
      ...(nonce !== undefined && { nonce }),
      ...(reference?.message_id && { message_reference: { message_id: reference.message_id } }),
    };
    c.messages.push(message);
    dispatch("MESSAGE_CREATE", message);
    for (const listener of botListeners) listener(message);
    if (failure?.mode === "500-after-create") {
      json(res, 500, { message: "500: Internal Server Error", code: 0 });
      return;
    }
    json(res, 200, message);
  }

  function rateLimited(res: ServerResponse, retryAfterSec: number): void {
    res.writeHead(429, {
      "content-type": "application/json",
      "retry-after": String(retryAfterSec),
      "x-ratelimit-scope": "user",
    });
    res.end(
      JSON.stringify({
        message: "You are being rate limited.",
        retry_after: retryAfterSec,
        global: false,
      }),
    );
  }

  function addChannel(channel: Omit<FakeChannel, "messages">): string {
    channels.set(channel.id, { ...channel, messages: [] });
    return channel.id;
  }

  return {
    apiRoot,
    gatewayUrl,
    bot,
    guildId,
    received,
    requests,
    requestLog,
    failEdits(count, retryAfterSec) {
      for (let i = 0; i < count; i++) editFailures.push(retryAfterSec);
    },
    connections: () => connectionCount,
    identifies: () => received.filter((r) => r.op === 2),
    resumes: () =>
      received.filter((r) => r.op === 6).map((r) => r.d as { session_id: string; seq: number }),
    sessionIds: () => [...readyIds],
    createGuildChannel: () => addChannel({ id: snowflake(), type: 0, guild_id: guildId }),
    dmChannel(userId) {
      let id = dms.get(userId);
      if (!id) {
        id = addChannel({ id: snowflake(), type: 1 });
        dms.set(userId, id);
      }
      return id;
    },
    userSends({ channelId, user, content, mentionBot }) {
      const c = channels.get(channelId);
      if (!c) throw new Error(`no channel ${channelId}`);
      const message: FakeMessage = {
        id: snowflake(),
        channel_id: channelId,
        ...(c.guild_id && { guild_id: c.guild_id }),
        author: user,
        content: mentionBot ? `<@${bot.id}> ${content}` : content,
        type: 0,
        mentions: mentionBot ? [bot] : [],
        timestamp: new Date().toISOString(),
      };
      c.messages.push(message);
      dispatch("MESSAGE_CREATE", message);
      return message;
    },
    redeliver(message) {
      dispatch("MESSAGE_CREATE", message);
    },
    sequenceOf(messageId) {
      const event = currentSession?.events.find(
        (e) => e.t === "MESSAGE_CREATE" && (e.d as FakeMessage).id === messageId,
      );
      return event?.s ?? null;
    },
    onBotMessage(listener) {
      botListeners.add(listener);
      return () => botListeners.delete(listener);
    },
    botMessages: (channelId) =>
      (channels.get(channelId)?.messages ?? []).filter((m) => m.author.id === bot.id),
    allBotMessages: () =>
      [...channels.values()].flatMap((c) => c.messages.filter((m) => m.author.id === bot.id)),
    channel: (channelId) => {
      const c = channels.get(channelId);
      return c && { type: c.type, ...(c.parent_id && { parent_id: c.parent_id }) };
    },
    userInvokes({ channelId, user, name }) {
      const c = channels.get(channelId);
      if (!c) throw new Error(`no channel ${channelId}`);
      const id = snowflake();
      dispatch("INTERACTION_CREATE", {
        id,
        application_id: bot.id,
        type: 2,
        token: `itoken-${id}`,
        version: 1,
        data: { id: snowflake(), name, type: 1 },
        channel: { id: c.id, type: c.type },
        channel_id: c.id,
        ...(c.guild_id ? { guild_id: c.guild_id, member: { user } } : { user }),
      });
      return { id };
    },
    interactionCallbacks: () => [...callbacks],
    registeredCommands: () => [...commands],
    dropConnections() {
      for (const socket of sockets) socket.terminate();
      for (const session of sessions.values()) session.socket = null;
    },
    requestReconnect() {
      for (const socket of sockets) send(socket, { op: 7, d: null });
    },
    closeConnections(code) {
      for (const socket of sockets) socket.close(code);
      for (const session of sessions.values()) session.socket = null;
    },
    stall() {
      for (const socket of sockets) stalled.add(socket);
      for (const session of sessions.values()) session.socket = null;
    },
    invalidateSessions() {
      for (const session of sessions.values()) session.valid = false;
      currentSession = null;
    },
    failSends(count, mode, retryAfterSec = 0.05) {
      for (let i = 0; i < count; i++) sendFailures.push({ mode, retryAfterSec });
    },
    async close() {
      for (const socket of sockets) socket.terminate();
      wss.close();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
