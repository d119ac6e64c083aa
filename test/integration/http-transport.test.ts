/**
 * Transport limits (issue 33, docs/security.md "Slow and greedy clients"), through the real HTTP
 * server of a real gateway: a client that never finishes its headers or its body is closed, a
 * connection beyond `http.max_connections` is closed as it arrives, every loopback address shares
 * one failed-auth allowance, and a `/v1` stream client that stops reading is cut off while its
 * turn finishes and its reply stays in the session. Each waits for an effect (a closed socket, an
 * answer), never for a time.
 */
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
