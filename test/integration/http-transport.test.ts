/**
 * Transport limits (issue 33, docs/security.md "Slow and greedy clients"), through the real HTTP
 * server of a real gateway: a client that never finishes its headers or its body is closed, a
 * connection beyond `http.max_connections` is closed as it arrives, every loopback address shares
 * one failed-auth allowance, and a `/v1` stream client that stops reading is cut off while its
 * turn finishes and its reply stays in the session; the text deltas that wait for a lagging
 * stream client are merged into few events. Each waits for an effect (a closed socket, an answer,
 * a stored reply), never for a time.
 */
import { type IncomingMessage, request } from "node:http";
import { connect, type Socket } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { lastUserText } from "../fakes/openai-server.js";
import { rawRequest } from "../helpers/raw-http.js";
import {
  API_KEY,
  bearer,
  completion,
  fakeModel,
  json,
  runCleanups,
  start,
} from "../helpers/security-gateway.js";
import { waitFor } from "../helpers/wait-for.js";

afterEach(runCleanups);

/** A raw connection that records what it receives and whether it was closed. */
function openSocket(
  port: number,
): Promise<{ socket: Socket; received: () => string; closed: () => boolean }> {
  return new Promise((resolve, reject) => {
    let data = "";
    let closed = false;
    const socket = connect(port, "127.0.0.1", () =>
      resolve({ socket, received: () => data, closed: () => closed }),
    );
    socket.setEncoding("utf8");
    socket.on("data", (chunk: string) => (data += chunk));
    socket.on("close", () => (closed = true));
    socket.on("error", () => {});
    socket.once("error", reject);
  });
}

describe("slow clients", () => {
  it("closes a connection whose headers never finish (http.headers_timeout)", async () => {
    const s = await start({}, "http:\n  headers_timeout: 0.5\n  request_timeout: 0.5\n");
    const c = await openSocket(s.port);
    c.socket.write(`GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:${s.port}\r\nX-Half: ab`);
    await waitFor(c.closed, { timeoutMs: 15_000, message: "the slow client closed" });
    expect(c.received()).toMatch(/^HTTP\/1\.1 408/);
    // The gateway goes on answering everyone else.
    expect((await rawRequest(s.port, { path: "/healthz" })).status).toBe(200);
  });

  it("closes a connection whose body never finishes (http.request_timeout)", async () => {
    const s = await start({}, "http:\n  headers_timeout: 0.5\n  request_timeout: 0.5\n");
    const c = await openSocket(s.port);
    c.socket.write(
      `POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:${s.port}\r\n` +
        `Authorization: Bearer ${s.token}\r\nContent-Type: application/json\r\n` +
        `Content-Length: 100\r\n\r\n{"messages":`,
    );
    await waitFor(c.closed, { timeoutMs: 15_000, message: "the slow client closed" });
    expect(c.received()).toMatch(/^HTTP\/1\.1 408/);
  });

  it("never times an answer: a stream that outlasts http.request_timeout completes", async () => {
    const s = await start({}, "http:\n  headers_timeout: 0.3\n  request_timeout: 0.3\n");
    const res = await rawRequest(s.port, {
      method: "POST",
      path: "/v1/chat/completions",
      headers: { ...bearer(s.token), ...json },
      body: JSON.stringify({
        messages: [{ role: "user", content: "slow: 1200 finally" }],
        stream: true,
      }),
    });
    expect(res.status).toBe(200);
    const text = [...res.body.matchAll(/"content":"([^"]*)"/g)].map((m) => m[1]).join("");
    expect(text).toBe("finally");
    expect(res.body).toContain("data: [DONE]");
  });
});

describe("long-lived connections", () => {
  it("a /ws socket outlives http.request_timeout: only the upgrade request is timed", async () => {
    const s = await start({}, "http:\n  headers_timeout: 0.3\n  request_timeout: 0.3\n");
    const ws = new WebSocket(`ws://127.0.0.1:${s.port}/ws`, ["keel.v1", `keel.token.${s.token}`]);
    const frames: string[] = [];
    ws.on("message", (data) => frames.push(String(data)));
    await new Promise<void>((resolve, reject) => {
      ws.once("open", () => resolve());
      ws.once("error", reject);
    });
    // A client that never finishes its headers, opened after the socket: once it has been
    // closed, the deadline checks have run past the socket's own request.
    const slow = await openSocket(s.port);
    slow.socket.write(`GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:${s.port}\r\n`);
    await waitFor(slow.closed, { timeoutMs: 15_000, message: "the slow client closed" });
    ws.send(JSON.stringify({ type: "ping" }));
    await waitFor(() => frames.some((f) => f.includes('"pong"')), { message: "a pong" });
    expect(ws.readyState).toBe(WebSocket.OPEN);
    ws.close();
  });
});

describe("too many connections", () => {
  it("closes a connection beyond http.max_connections at once, and takes new ones when one ends", async () => {
    const s = await start({}, "http:\n  max_connections: 2\n");
    const first = await openSocket(s.port);
    const second = await openSocket(s.port);
    const third = await openSocket(s.port);
    await waitFor(third.closed, { timeoutMs: 5_000, message: "the third connection closed" });
    expect(third.received()).toBe("");
    expect(first.closed() || second.closed()).toBe(false);
    first.socket.destroy();
    const answer = await waitFor(
      async () => {
        const res = await rawRequest(s.port, { path: "/healthz" }).catch(() => null);
        return res?.status === 200 ? res : null;
      },
      { timeoutMs: 5_000, message: "a request through the freed slot" },
    );
    expect(answer.status).toBe(200);
    second.socket.destroy();
  });
});

describe("guessing from many loopback addresses", () => {
  it("locks out 127.0.0.2 after the failures of 127.0.0.1: every loopback address is one client", async () => {
    const s = await start({ KEEL_API_KEY: API_KEY });
    for (let i = 0; i < 10; i++) {
      const res = await rawRequest(s.port, {
        path: "/api/status",
        headers: bearer(`guess-${i}-0123456789abcdef`),
        localAddress: "127.0.0.1",
      });
      expect(res.status).toBe(401);
    }
    const other = await rawRequest(s.port, {
      path: "/api/status",
      headers: bearer("guess-from-another-address-0123"),
      localAddress: "127.0.0.2",
    });
    expect(other.status).toBe(429);
    // The operator still passes.
    const operator = await rawRequest(s.port, {
      path: "/api/status",
      headers: bearer(s.token),
      localAddress: "127.0.0.3",
    });
    expect(operator.status).toBe(200);
  });
});

describe("a stream client that stops reading", () => {
  it("is cut off once http.max_buffered_bytes wait for it; its turn finishes and the reply stays in the session", async () => {
    const model = await fakeModel();
    // Larger than what the kernel's socket buffers take before the gateway has to hold it.
    const big = "x".repeat(12 * 1_048_576);
    model.script((request) =>
      lastUserText(request).startsWith("flood") ? { text: big } : { text: "ok" },
    );
    const s = await start({}, "http:\n  max_buffered_bytes: 65536\n");
    const body = JSON.stringify({
      messages: [{ role: "user", content: "flood me" }],
      stream: true,
    });
    const reader = await openSocket(s.port);
    reader.socket.pause();
    reader.socket.write(
      `POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:${s.port}\r\n` +
        `Authorization: Bearer ${s.token}\r\nContent-Type: application/json\r\n` +
        `Idempotency-Key: flood-1\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
    );
    // The same request again, not streamed: it waits for the turn and answers from the record.
    const repeat = await rawRequest(s.port, {
      method: "POST",
      path: "/v1/chat/completions",
      headers: { ...bearer(s.token), ...json, "idempotency-key": "flood-1" },
      body: JSON.stringify({ messages: [{ role: "user", content: "flood me" }], stream: false }),
    });
    expect(repeat.status).toBe(200);
    expect(JSON.parse(repeat.body).choices[0].message.content).toBe(big);
    const sessionId = repeat.headers["x-session-id"] as string;
    const stored = await rawRequest(s.port, {
      path: `/api/sessions/${sessionId}`,
      headers: bearer(s.token),
    });
    const messages = JSON.parse(stored.body).messages as { role: string; content: string }[];
    expect(messages.at(-1)).toMatchObject({ role: "assistant", content: big });

    // Reading again, the client finds its stream cut short: what the socket buffers held, no end.
    reader.socket.resume();
    await waitFor(reader.closed, { timeoutMs: 15_000, message: "the cut-off stream closed" });
    expect(reader.received()).toMatch(/^HTTP\/1\.1 200/);
    expect(reader.received()).not.toContain("[DONE]");
    expect(reader.received().length).toBeLessThan(big.length);
  });
});

/**
 * A `/v1` stream whose client stops reading as soon as the headers arrive (its response paused:
 * the socket is no longer read once Node's small buffer is full); `resume` reads it to the end.
 */
function pausedStream(
  port: number,
  token: string,
  path: string,
  body: unknown,
): Promise<{ sessionId: string; resume: () => Promise<string> }> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: "127.0.0.1",
        port,
        method: "POST",
        path,
        headers: { ...bearer(token), ...json },
      },
      (res: IncomingMessage) => {
        res.pause();
        const resume = () =>
          new Promise<string>((done, failed) => {
            let text = "";
            res.setEncoding("utf8");
            res.on("data", (chunk: string) => (text += chunk));
            res.on("end", () => done(text));
            res.on("error", failed);
            res.resume();
          });
        resolve({ sessionId: String(res.headers["x-session-id"]), resume });
      },
    );
    req.on("error", reject);
    req.end(JSON.stringify(body));
  });
}

/** The `data:` of each event of a whole SSE body, with its `event:` name if it has one. */
function sseEvents(body: string): { event?: string; data: string }[] {
  return body
    .split("\n\n")
    .filter((frame) => frame.includes("data: "))
    .map((frame) => {
      const event = /^event: (.*)$/m.exec(frame)?.[1];
      const data = /^data: (.*)$/m.exec(frame)![1]!;
      return event === undefined ? { data } : { event, data };
    });
}

describe("a stream client that lags", () => {
  // Each case moves 8 MiB and polls the session for its reply: 7 s alone, 30 s and more when the
  // machine is loaded.
  // The first piece is more than the kernel's socket buffers take: the deltas after it wait in
  // the gateway while the client does not read.
  const big = "y".repeat(8 * 1_048_576);
  const small = Array.from({ length: 5000 }, (_, i) => `w${i} `);
  const whole = big + small.join("");

  /** The gateway with room for all of it (no cut-off), the model answering "long" with it. */
  async function lagging() {
    const model = await fakeModel();
    model.script((request) =>
      lastUserText(request).startsWith("long") ? { pieces: [big, ...small] } : { text: "ok" },
    );
    const s = await start({}, "http:\n  max_buffered_bytes: 67108864\n");
    /** Resolves once the session holds the whole reply: every delta was handed to the stream. */
    const replied = (sessionId: string) =>
      waitFor(
        async () => {
          const stored = await rawRequest(s.port, {
            path: `/api/sessions/${sessionId}`,
            headers: bearer(s.token),
          });
          const messages = JSON.parse(stored.body).messages as { role: string; content: string }[];
          return messages.at(-1)?.role === "assistant" && messages.at(-1)?.content === whole;
        },
        { timeoutMs: 30_000, intervalMs: 200, message: "the reply stored" },
      );
    return { s, replied };
  }

  it("gets the whole chat completion, the deltas that waited for it merged into few chunks", async () => {
    const { s, replied } = await lagging();
    const stream = await pausedStream(s.port, s.token, "/v1/chat/completions", {
      messages: [{ role: "user", content: "long answer" }],
      stream: true,
    });
    await replied(stream.sessionId);
    const events = sseEvents(await stream.resume());
    expect(events.at(-1)?.data).toBe("[DONE]");
    const chunks = events.slice(0, -1).map((e) => JSON.parse(e.data));
    const contents = chunks
      .map((c) => c.choices[0]?.delta?.content)
      .filter((c): c is string => typeof c === "string" && c.length > 0);
    expect(contents.join("")).toBe(whole);
    // 5,001 deltas from the model; one chunk each would be 5,001 chunks of text.
    expect(contents.length).toBeLessThan(50);
    expect(chunks.at(-1).choices[0].finish_reason).toBe("stop");
  }, 120_000);

  it("gets the whole Responses API answer, the deltas that waited for it merged, numbered in order", async () => {
    const { s, replied } = await lagging();
    const stream = await pausedStream(s.port, s.token, "/v1/responses", {
      input: "long answer",
      stream: true,
    });
    await replied(stream.sessionId);
    const events = sseEvents(await stream.resume());
    const parsed = events.map((e) => ({ name: e.event, body: JSON.parse(e.data) }));
    expect(parsed.every((e) => e.name === e.body.type)).toBe(true);
    expect(parsed.map((e) => e.body.sequence_number)).toEqual(parsed.map((_, i) => i));
    const deltas = parsed.filter((e) => e.name === "response.output_text.delta");
    expect(deltas.map((e) => e.body.delta).join("")).toBe(whole);
    expect(deltas.length).toBeLessThan(50);
    expect(parsed.at(-1)?.name).toBe("response.completed");
    expect(parsed.find((e) => e.name === "response.output_text.done")?.body.text).toBe(whole);
  }, 120_000);
});

describe("the limits are settings", () => {
  it("the login cookie lasts http.session_ttl (default 12 hours)", async () => {
    const login = async (port: number, token: string) =>
      String(
        (await rawRequest(port, { path: `/?token=${encodeURIComponent(token)}` })).headers[
          "set-cookie"
        ],
      );
    const byDefault = await start();
    expect(await login(byDefault.port, byDefault.token)).toContain("Max-Age=43200;");
    const short = await start({}, "http:\n  session_ttl: 600\n");
    expect(await login(short.port, short.token)).toContain("Max-Age=600;");
  });

  it("refuses a headers_timeout longer than request_timeout, naming both", async () => {
    await expect(start({}, "http:\n  headers_timeout: 90\n")).rejects.toThrow(
      /http\.headers_timeout must not exceed http\.request_timeout/,
    );
    expect(completion("x")).toContain("x");
  });
});
