import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { pino } from "pino";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { WebSocket } from "ws";
import { waitFor } from "../../../test/helpers/wait-for.js";
import type { AcceptResult, InboundMessage, InboundSink } from "../../contract/platform.js";
import type { SessionSummary } from "../../sessions/store.js";
import { SUBPROTOCOL, WebchatAdapter, type WebchatStore } from "./adapter.js";
import { webSocketToken } from "./upgrade-auth.js";

/** Channel events in an array: the only store methods the adapter uses. */
function arrayStore() {
  const rows: { channel: string; seq: number; payload: unknown }[] = [];
  let gate: Promise<void> | null = null;
  const store: WebchatStore & {
    rows: typeof rows;
    sessions: SessionSummary[];
    reads: number;
    holdReads(g: Promise<void> | null): void;
  } = {
    rows,
    sessions: [],
    reads: 0,
    holdReads(g) {
      gate = g;
    },
    async appendChannelEvent(channel, payload) {
      const seq = rows.length + 1;
      rows.push({ channel, seq, payload: JSON.parse(JSON.stringify(payload)) });
      return seq;
    },
    async listChannelEvents(channel, afterSeq, limit = 1000) {
      store.reads += 1;
      const result = rows
        .filter((r) => r.channel === channel && r.seq > afterSeq)
        .slice(0, limit)
        .map(({ seq, payload }) => ({ seq, payload }));
      if (gate) await gate;
      return result;
    },
    async listSessions(): Promise<SessionSummary[]> {
      return store.sessions;
    },
  };
  return store;
}

/** Dedupes by platform message id; `hold` keeps `receive` from resolving until released. */
function dedupingSink() {
  const accepted: InboundMessage[] = [];
  const calls: InboundMessage[] = [];
  let gate: Promise<void> | null = null;
  const sink: InboundSink & {
    accepted: InboundMessage[];
    calls: InboundMessage[];
    hold(): () => void;
  } = {
    accepted,
    calls,
    hold() {
      let release = () => {};
      gate = new Promise((resolve) => {
        release = resolve;
      });
      return () => {
        gate = null;
        release();
      };
    },
    async receive(message): Promise<AcceptResult> {
      calls.push(message);
      if (gate) await gate;
      const index = accepted.findIndex((m) => m.platformMessageId === message.platformMessageId);
      if (index >= 0) return { accepted: false, inboxId: index + 1, sessionId: "s1" };
      accepted.push(message);
      return { accepted: true, inboxId: accepted.length, sessionId: "s1" };
    },
  };
  return sink;
}

interface TestClient {
  ws: WebSocket;
  frames: Array<Record<string, unknown>>;
  send(frame: unknown): void;
  of(type: string): Array<Record<string, unknown>>;
}

let server: Server;
let adapter: WebchatAdapter;
let store: ReturnType<typeof arrayStore>;
let sink: ReturnType<typeof dedupingSink>;
let allowed: boolean;
let port: number;
const sockets: WebSocket[] = [];

beforeEach(async () => {
  store = arrayStore();
  sink = dedupingSink();
  allowed = true;
  adapter = new WebchatAdapter({
    store,
    logger: pino({ level: "silent" }),
    authorize: async () =>
      allowed ? { ok: true, operator: true } : { ok: false, status: "401 Unauthorized" },
  });
  await adapter.start(sink);
  server = createServer((_req, res) => res.writeHead(404).end());
  server.on("upgrade", (req, socket, head) => adapter.handleUpgrade(req, socket, head));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  port = (server.address() as AddressInfo).port;
});

afterEach(async () => {
  for (const ws of sockets.splice(0)) ws.terminate();
  await adapter.stop();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

async function connect(headers: Record<string, string> = {}): Promise<TestClient> {
  const ws = new WebSocket(`ws://127.0.0.1:${port}/ws`, [SUBPROTOCOL], { headers });
  sockets.push(ws);
  const frames: Array<Record<string, unknown>> = [];
  ws.on("message", (data) => frames.push(JSON.parse(String(data))));
  await new Promise<void>((resolve, reject) => {
    ws.once("open", () => resolve());
    ws.once("error", reject);
  });
  await waitFor(() => frames.some((f) => f.type === "hello"));
  return {
    ws,
    frames,
    send: (frame) => ws.send(JSON.stringify(frame)),
    of: (type) => frames.filter((f) => f.type === type),
  };
}

/** Resolves with the HTTP status of a refused upgrade. */
function refusedStatus(headers: Record<string, string>): Promise<number> {
  const ws = new WebSocket(`ws://127.0.0.1:${port}/ws`, [SUBPROTOCOL], { headers });
  sockets.push(ws);
  return new Promise((resolve, reject) => {
    ws.once("open", () => reject(new Error("upgrade was accepted")));
    ws.once("unexpected-response", (_req, res) => resolve(res.statusCode ?? 0));
    ws.once("error", () => {});
  });
}

function reply(outboxId: number, text: string, conversationId = "c1") {
  return {
    outboxId,
    sessionKey: `agent:main:webchat:${conversationId}`,
    sessionId: "s1",
    address: { platform: "webchat", chatId: conversationId },
    text,
    kind: "reply" as const,
  };
}

describe("WebchatAdapter", () => {
  it("a stop that comes while a start is still loading wins", async () => {
    const late = new WebchatAdapter({
      store,
      logger: pino({ level: "silent" }),
      authorize: async () => ({ ok: true, operator: true }),
      heartbeatMs: 10,
    });
    const starting = late.start(sink);
    await late.stop();
    await starting;
    expect(late.status().state).toBe("stopped");
  });

  it("acks a message only after the sink has committed it", async () => {
    const client = await connect();
    client.send({ type: "open", conversation_id: "c1", after_seq: 0 });
    await waitFor(() => client.of("synced").length === 1);
    const release = sink.hold();
    client.send({ type: "send", conversation_id: "c1", client_id: "m1", text: "hello" });
    await waitFor(() => sink.calls.length === 1);
    // A pong answered after the frame proves no ack was sent ahead of it.
    client.send({ type: "ping" });
    await waitFor(() => client.of("pong").length === 1);
    expect(client.of("ack")).toEqual([]);
    release();
    await waitFor(() => client.of("ack").length === 1);
    expect(client.of("ack")[0]).toMatchObject({ client_id: "m1", duplicate: false, seq: 1 });
    expect(client.of("event")).toEqual([
      expect.objectContaining({ seq: 1, kind: "user", text: "hello", client_id: "m1" }),
    ]);
    expect(sink.accepted[0]).toMatchObject({
      platform: "webchat",
      chatId: "c1",
      platformMessageId: "m1",
      sessionKey: "agent:main:webchat:c1",
      text: "hello",
    });
  });

  it("accepts a message resent with the same client_id once", async () => {
    const first = await connect();
    first.send({ type: "send", conversation_id: "c1", client_id: "m1", text: "hello" });
    await waitFor(() => first.of("ack").length === 1);
    first.ws.terminate();
    const second = await connect();
    second.send({ type: "send", conversation_id: "c1", client_id: "m1", text: "hello" });
    await waitFor(() => second.of("ack").length === 1);
    expect(second.of("ack")[0]).toMatchObject({ client_id: "m1", duplicate: true, seq: null });
    expect(sink.calls).toHaveLength(2);
    expect(sink.accepted).toHaveLength(1);
    expect(store.rows.filter((r) => (r.payload as { kind: string }).kind === "user")).toHaveLength(
      1,
    );
  });

  it("delivers a reply as a durable event to the clients of its conversation", async () => {
    const mine = await connect();
    const other = await connect();
    mine.send({ type: "open", conversation_id: "c1", after_seq: 0 });
    other.send({ type: "open", conversation_id: "c2", after_seq: 0 });
    await waitFor(() => mine.of("synced").length === 1 && other.of("synced").length === 1);
    await adapter.deliver(reply(7, "the answer"));
    await waitFor(() => mine.of("event").length === 1);
    expect(mine.of("event")[0]).toMatchObject({
      conversation_id: "c1",
      seq: 1,
      kind: "reply",
      text: "the answer",
      outbox_id: 7,
    });
    expect(store.rows).toHaveLength(1);
    // The same outbox row delivered again in this process is not stored twice.
    await adapter.deliver(reply(7, "the answer"));
    expect(store.rows).toHaveLength(1);
    other.send({ type: "ping" });
    await waitFor(() => other.of("pong").length === 1);
    expect(other.of("event")).toEqual([]);
  });

  it("an approval card carries its approval id, also when replayed", async () => {
    const page = await connect();
    page.send({ type: "open", conversation_id: "c1", after_seq: 0 });
    await waitFor(() => page.of("synced").length === 1);
    await adapter.deliver({ ...reply(8, "May I run rm -rf x?"), approvalId: "ab12cd34ef" });
    await waitFor(() => page.of("event").length === 1);
    expect(page.of("event")[0]).toMatchObject({ outbox_id: 8, approval_id: "ab12cd34ef" });
    const later = await connect();
    later.send({ type: "open", conversation_id: "c1", after_seq: 0 });
    await waitFor(() => later.of("event").length === 1);
    expect(later.of("event")[0]).toMatchObject({ approval_id: "ab12cd34ef" });
  });

  it("lists conversations titled by their first user message", async () => {
    const client = await connect();
    client.send({ type: "send", conversation_id: "c1", client_id: "m1", text: "first question" });
    await waitFor(() => client.of("ack").length === 1);
    await adapter.deliver(reply(1, "the answer"));
    store.sessions = [
      {
        key: "agent:main:webchat:c1",
        sessionId: "s1",
        platform: "webchat",
        messageCount: 2,
        lastMessage: "the answer",
        firstMessage: "first question",
        chatName: null,
        promptTokens: 0,
        completionTokens: 0,
        resumePending: false,
        suspended: false,
        updatedAt: 1,
      },
    ];
    client.send({ type: "list" });
    await waitFor(() => client.of("conversations").length === 1);
    expect(client.of("conversations")[0]!.conversations).toEqual([
      expect.objectContaining({
        conversation_id: "c1",
        title: "first question",
        last_message: "the answer",
      }),
    ]);
  });

  it("stores a reply when no page is connected", async () => {
    await adapter.deliver(reply(1, "while you were away"));
    const client = await connect();
    client.send({ type: "hello", conversation_id: "c1", last_seq: 0 });
    await waitFor(() => client.of("synced").length === 1);
    expect(client.of("event").map((f) => f.text)).toEqual(["while you were away"]);
  });

  it("replays exactly the missed events to a client reconnecting with its last seq", async () => {
    const first = await connect();
    first.send({ type: "open", conversation_id: "c1", after_seq: 0 });
    first.send({ type: "send", conversation_id: "c1", client_id: "m1", text: "q1" });
    await waitFor(() => first.of("ack").length === 1);
    await adapter.deliver(reply(1, "a1"));
    await waitFor(() => first.of("event").length === 2);
    const lastSeq = first.of("event").at(-1)?.seq as number;
    first.ws.terminate();

    await adapter.deliver(reply(2, "a2"));
    await adapter.deliver(reply(3, "a3"));
    const second = await connect();
    second.send({ type: "hello", conversation_id: "c1", last_seq: lastSeq });
    await waitFor(() => second.of("synced").length === 1);
    await adapter.deliver(reply(4, "a4"));
    await waitFor(() => second.of("event").length === 3);
    second.send({ type: "ping" });
    await waitFor(() => second.of("pong").length === 1);
    expect(second.of("event").map((f) => [f.seq, f.text])).toEqual([
      [3, "a2"],
      [4, "a3"],
      [5, "a4"],
    ]);
    expect(second.of("synced")[0]).toMatchObject({ conversation_id: "c1", last_seq: 4 });
  });

  it("sends an event stored during a replay once, in seq order", async () => {
    await adapter.deliver(reply(1, "a1"));
    let release = () => {};
    store.holdReads(
      new Promise((resolve) => {
        release = resolve;
      }),
    );
    const client = await connect();
    const readsBefore = store.reads;
    client.send({ type: "open", conversation_id: "c1", after_seq: 0 });
    await waitFor(() => store.reads > readsBefore);
    await adapter.deliver(reply(2, "a2"));
    store.holdReads(null);
    release();
    await waitFor(() => client.of("synced").length === 1);
    expect(client.of("event").map((f) => f.seq)).toEqual([1, 2]);
  });

  it("sends a turn started while its message is being stored after that message's event", async () => {
    const page = await connect();
    page.send({ type: "open", conversation_id: "c1", after_seq: 0 });
    await waitFor(() => page.of("synced").length === 1);
    // The runner starts the turn as soon as the inbox has the message: before the user event.
    const release = sink.hold();
    page.send({ type: "send", conversation_id: "c1", client_id: "m1", text: "hello" });
    await waitFor(() => sink.calls.length === 1);
    const base = { sessionKey: "agent:main:webchat:c1", sessionId: "s1" };
    adapter.publishTurnEvent({ ...base, event: { type: "turn_start" } });
    adapter.publishTurnEvent({ ...base, event: { type: "text_delta", text: "Hi" } });
    release();
    await waitFor(() => page.of("delta").length === 1);
    const order = page.frames
      .filter((f) => f.type !== "hello" && f.type !== "synced")
      .map((f) => (f.type === "event" ? `event:${f.kind}` : f.type));
    expect(order).toEqual(["event:user", "ack", "turn_start", "delta"]);
  });

  it("stores an approval's answer as an event of the card's conversation", async () => {
    const page = await connect();
    page.send({ type: "open", conversation_id: "c1", after_seq: 0 });
    await waitFor(() => page.of("synced").length === 1);
    await adapter.deliver({ ...reply(8, "May I run rm -rf x?"), approvalId: "ab12cd34ef" });
    await adapter.approvalAnswered("ab12cd34ef", "Approved once by ann\nrm -rf x", {
      platform: "webchat",
      chatId: "c1",
    });
    await waitFor(() => page.of("event").length === 2);
    expect(page.of("event")[1]).toMatchObject({
      seq: 2,
      kind: "approval_answered",
      approval_id: "ab12cd34ef",
      text: "Approved once by ann\nrm -rf x",
    });
    const later = await connect();
    later.send({ type: "open", conversation_id: "c1", after_seq: 0 });
    await waitFor(() => later.of("event").length === 2);
    expect(later.of("event")[1]).toMatchObject({ kind: "approval_answered" });
  });

  it("streams live turn events and gives a late page the running turn", async () => {
    const early = await connect();
    early.send({ type: "open", conversation_id: "c1", after_seq: 0 });
    await waitFor(() => early.of("synced").length === 1);
    const base = { sessionKey: "agent:main:webchat:c1", sessionId: "s1" };
    adapter.publishTurnEvent({ ...base, event: { type: "turn_start" } });
    adapter.publishTurnEvent({ ...base, event: { type: "text_delta", text: "Hel" } });
    adapter.publishTurnEvent({
      ...base,
      event: {
        type: "tool_start",
        toolCallId: "t1",
        name: "terminal",
        arguments: '{"command":"ls"}',
      },
    });
    adapter.publishTurnEvent({
      ...base,
      event: {
        type: "tool_end",
        toolCallId: "t1",
        name: "terminal",
        output: "a.txt",
        isError: false,
      },
    });
    adapter.publishTurnEvent({ ...base, event: { type: "text_delta", text: "lo" } });
    await waitFor(() => early.of("delta").length === 2);
    expect(
      early.frames.filter((f) => f.seq === undefined && f.type !== "hello").map((f) => f.type),
    ).toEqual(["synced", "turn_start", "delta", "tool_start", "tool_end", "delta"]);

    const late = await connect();
    late.send({ type: "open", conversation_id: "c1", after_seq: 0 });
    await waitFor(() => late.of("delta").length === 2);
    expect(late.frames.map((f) => f.type)).toEqual([
      "hello",
      // The finished tool call, stored.
      "event",
      "synced",
      "turn_start",
      "delta",
      "tool_start",
      "tool_end",
      "delta",
    ]);
    expect(late.of("tool_end")[0]).toMatchObject({
      tool_call_id: "t1",
      output: "a.txt",
      is_error: false,
    });

    adapter.publishTurnEvent({ ...base, event: { type: "turn_end", stopReason: "stop" } });
    await waitFor(() => late.of("turn_end").length === 1);
    const third = await connect();
    third.send({ type: "open", conversation_id: "c1", after_seq: 0 });
    await waitFor(() => third.of("synced").length === 1);
    third.send({ type: "ping" });
    await waitFor(() => third.of("pong").length === 1);
    expect(third.of("turn_start")).toEqual([]);
  });

  it("stores each finished tool call, so a page opened after the turn still shows it", async () => {
    const base = { sessionKey: "agent:main:webchat:c1", sessionId: "s1" };
    adapter.publishTurnEvent({ ...base, event: { type: "turn_start" } });
    adapter.publishTurnEvent({
      ...base,
      event: {
        type: "tool_start",
        toolCallId: "t9",
        name: "terminal",
        arguments: '{"command":"npm test"}',
      },
    });
    adapter.publishTurnEvent({
      ...base,
      event: {
        type: "tool_end",
        toolCallId: "t9",
        name: "terminal",
        output: `${"x".repeat(10_000)}tests passed`,
        isError: false,
      },
    });
    adapter.publishTurnEvent({ ...base, event: { type: "turn_end", stopReason: "stop" } });
    await adapter.deliver(reply(5, "All green."));
    const page = await connect();
    page.send({ type: "open", conversation_id: "c1", after_seq: 0 });
    await waitFor(() => page.of("synced").length === 1);
    const events = page.of("event");
    expect(events.map((f) => f.kind)).toEqual(["tool", "reply"]);
    const tool = events[0]!.tool as Record<string, unknown>;
    expect(tool).toMatchObject({
      tool_call_id: "t9",
      name: "terminal",
      arguments: '{"command":"npm test"}',
      is_error: false,
    });
    expect(String(tool.output).endsWith("tests passed")).toBe(true);
    expect(String(tool.output).length).toBe(4_000);
  });

  it("refuses a cross-site Origin and accepts a same-site one", async () => {
    expect(await refusedStatus({ Origin: "http://evil.example" })).toBe(403);
    const client = await connect({ Origin: `http://127.0.0.1:${port}` });
    expect(client.ws.protocol).toBe(SUBPROTOCOL);
  });

  it("refuses an upgrade the caller does not allow", async () => {
    allowed = false;
    expect(await refusedStatus({})).toBe(401);
  });

  it("answers a malformed frame with an error and keeps the connection", async () => {
    const client = await connect();
    client.send({ type: "send", conversation_id: "c1", client_id: "bad id!", text: "x" });
    await waitFor(() => client.of("error").length === 1);
    expect(client.of("error")[0]).toMatchObject({ code: "bad_request", retryable: false });
    client.send({ type: "ping" });
    await waitFor(() => client.of("pong").length === 1);
    expect(sink.calls).toEqual([]);
  });

  it("reads the control token offered as a subprotocol", () => {
    const req = { headers: { "sec-websocket-protocol": "keel.v1, keel.token.abc123" } };
    expect(webSocketToken(req as never)).toBe("abc123");
    expect(webSocketToken({ headers: {} } as never)).toBeNull();
  });
});
