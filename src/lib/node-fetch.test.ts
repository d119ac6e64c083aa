import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { Readable } from "node:stream";
import { afterEach, describe, expect, it, vi } from "vitest";
import { v8FullCollection } from "../lifecycle/memory-settle.js";
import { chunksOf, createNodeFetch } from "./node-fetch.js";

type Handler = (req: IncomingMessage, body: string, res: ServerResponse) => void;

let server: Server | undefined;

afterEach(async () => {
  vi.unstubAllGlobals();
  server?.closeAllConnections();
  await new Promise((resolve) => server?.close(resolve) ?? resolve(undefined));
  server = undefined;
});

async function serve(handler: Handler): Promise<string> {
  server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => handler(req, Buffer.concat(chunks).toString("utf8"), res));
  });
  await new Promise<void>((resolve) => server!.listen(0, "127.0.0.1", resolve));
  return `http://127.0.0.1:${(server!.address() as AddressInfo).port}`;
}

describe("createNodeFetch", () => {
  it("sends the method, headers and string body, and streams the answer back as a Response", async () => {
    let seen: { method?: string; type?: string; auth?: string; length?: string; body: string } = {
      body: "",
    };
    const base = await serve((req, body, res) => {
      seen = {
        method: req.method,
        type: req.headers["content-type"],
        auth: req.headers.authorization,
        length: req.headers["content-length"],
        body,
      };
      res.writeHead(201, { "content-type": "text/event-stream", "x-request-id": "r1" });
      res.write("data: one\n\n");
      setTimeout(() => res.end("data: two\n\n"), 20);
    });
    // The model client must not go through the web fetch at all (see node-fetch.ts).
    vi.stubGlobal("fetch", () => Promise.reject(new Error("global fetch used")));
    const body = JSON.stringify({ text: "héllo" });
    const response = await createNodeFetch()(`${base}/v1/chat/completions`, {
      method: "POST",
      headers: new Headers({ "content-type": "application/json", authorization: "Bearer k" }),
      body,
    });
    expect(seen).toEqual({
      method: "POST",
      type: "application/json",
      auth: "Bearer k",
      length: String(Buffer.byteLength(body)),
      body,
    });
    expect(response.status).toBe(201);
    expect(response.ok).toBe(true);
    expect(response.headers.get("x-request-id")).toBe("r1");
    expect(await response.text()).toBe("data: one\n\ndata: two\n\n");
  });

  it("sends a Node stream body (grammY's file uploads) by piping it, not through the web fetch", async () => {
    let received = "";
    const base = await serve((_req, body, res) => {
      received = body;
      res.writeHead(200, { "content-type": "application/json", "content-length": "11" });
      res.end('{"ok":true}');
    });
    // The web fetch refuses such a body on Node 24 unless told `duplex: "half"`.
    vi.stubGlobal("fetch", () => Promise.reject(new Error("global fetch used")));
    async function* parts() {
      yield Buffer.from("--b\r\n");
      yield Buffer.from("photo bytes");
      yield Buffer.from("\r\n--b--");
    }
    const response = await createNodeFetch()(`${base}/bot/sendPhoto`, {
      method: "POST",
      headers: { "content-type": "multipart/form-data; boundary=b" },
      body: Readable.from(parts()) as unknown as RequestInit["body"],
    });
    expect(await response.json()).toEqual({ ok: true });
    expect(received).toBe("--b\r\nphoto bytes\r\n--b--");

    // A stream that fails fails the call.
    async function* broken() {
      yield Buffer.from("start");
      throw new Error("file vanished");
    }
    const failed = createNodeFetch()(`${base}/bot/sendPhoto`, {
      method: "POST",
      body: Readable.from(broken()) as unknown as RequestInit["body"],
    });
    await expect(failed).rejects.toThrow(/file vanished/);
  });

  it("closes an upload's stream when the request fails under it", async () => {
    const base = await serve(() => {});
    server!.on("request", (req: IncomingMessage) => req.socket.destroy());
    async function* slowParts() {
      yield Buffer.from("first part");
      await new Promise((resolve) => setTimeout(resolve, 5_000));
      yield Buffer.from("never sent");
    }
    const upload = Readable.from(slowParts());
    const failed = await createNodeFetch()(`${base}/bot/sendDocument`, {
      method: "POST",
      body: upload as unknown as RequestInit["body"],
    }).catch((error: unknown) => error);
    expect(failed).toBeInstanceOf(Error);
    // Left paused, the stream would hold its file open for good.
    await vi.waitFor(() => expect(upload.destroyed).toBe(true));
  });

  it("fails with an AbortError when aborted by a signal that carries no reason", async () => {
    const base = await serve((_req, _body, res) => {
      res.writeHead(200, { "content-type": "text/plain" });
      res.write("partial");
    });
    // As grammY's polyfilled AbortController makes them: no `reason`.
    const controller = new AbortController();
    Object.defineProperty(controller.signal, "reason", { value: undefined });
    const response = await createNodeFetch()(`${base}/`, { signal: controller.signal });
    const reading = response.text();
    controller.abort();
    await expect(reading).rejects.toMatchObject({ name: "AbortError" });
  });

  it("answers a status without a body with a null body, and an error status with its text", async () => {
    const base = await serve((req, _body, res) => {
      if (req.url === "/empty") res.writeHead(204).end();
      else res.writeHead(500, { "content-type": "application/json" }).end('{"error":"boom"}');
    });
    const fetchImpl = createNodeFetch();
    const empty = await fetchImpl(`${base}/empty`);
    expect(empty.status).toBe(204);
    expect(empty.body).toBeNull();
    const failed = await fetchImpl(new URL(`${base}/fail`));
    expect(failed.status).toBe(500);
    expect(failed.ok).toBe(false);
    expect(await failed.json()).toEqual({ error: "boom" });
  });

  it("rejects when aborted before the answer, and fails the body when aborted mid-stream", async () => {
    const closed: string[] = [];
    const base = await serve((req, _body, res) => {
      res.on("close", () => closed.push(req.url ?? ""));
      if (req.url === "/stream") {
        res.writeHead(200, { "content-type": "text/event-stream" });
        res.write("data: first\n\n");
      }
      // Otherwise never answers.
    });
    const fetchImpl = createNodeFetch();
    const early = new AbortController();
    const waiting = fetchImpl(`${base}/wait`, { signal: early.signal });
    setTimeout(() => early.abort(), 20);
    await expect(waiting).rejects.toMatchObject({ name: "AbortError" });

    const late = new AbortController();
    const response = await fetchImpl(`${base}/stream`, { signal: late.signal });
    const reader = response.body!.getReader();
    const first = await reader.read();
    expect(Buffer.from(first.value!).toString()).toBe("data: first\n\n");
    late.abort();
    await expect(reader.read()).rejects.toMatchObject({ name: "AbortError" });
    // Both connections are closed, not left open for the server to wait on.
    await vi.waitFor(() => expect(closed.sort()).toEqual(["/stream", "/wait"]));
  });

  it("fails a body cut off mid-stream with a TypeError, as the web fetch does", async () => {
    const base = await serve((_req, _body, res) => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.write("data: first\n\n");
      setTimeout(() => res.destroy(), 20);
    });
    const response = await createNodeFetch()(`${base}/`);
    const failure = await response.text().catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(TypeError);
    expect((failure as TypeError).message).toBe("terminated");
    expect((failure as TypeError).cause).toBeInstanceOf(Error);
  });

  it("reads an answer of known length whole, and fails it as the web fetch does when cut off or aborted", async () => {
    const base = await serve((req, _body, res) => {
      res.writeHead(200, { "content-type": "application/json", "content-length": "40" });
      res.write('{"ok":true,');
      if (req.url === "/whole") setTimeout(() => res.end(`"pad":"${"x".repeat(20)}"}`), 20);
      if (req.url === "/cut") setTimeout(() => res.destroy(), 20);
      // "/slow" never finishes.
    });
    const fetchImpl = createNodeFetch();
    const whole = await fetchImpl(`${base}/whole`);
    // Already read: the body is one piece, not a stream still arriving.
    expect(whole.headers.get("content-length")).toBe("40");
    expect(await whole.json()).toEqual({ ok: true, pad: "x".repeat(20) });

    const cut = await fetchImpl(`${base}/cut`).catch((error: unknown) => error);
    expect(cut).toBeInstanceOf(TypeError);
    expect((cut as TypeError).message).toBe("terminated");

    const controller = new AbortController();
    const slow = fetchImpl(`${base}/slow`, { signal: controller.signal });
    setTimeout(() => controller.abort(), 30);
    await expect(slow).rejects.toMatchObject({ name: "AbortError" });
  });

  it("fails the call on a status the web Response refuses, never from the socket's event", async () => {
    const base = await serve((_req, _body, res) => {
      res.statusCode = 999;
      res.end("odd");
    });
    // Node's own Response refuses it at once; the lighter Response that @hono/node-server installs
    // as the global one in a process serving HTTP (as the gateway, or an earlier test file in
    // this worker) refuses it on the first read. Either way the caller sees the RangeError.
    const outcome = await createNodeFetch()(`${base}/`)
      .then((response) => response.text())
      .then(
        () => "read",
        (error: unknown) => String(error),
      );
    expect(outcome).toMatch(/^RangeError: .*200 to 599/);
  });

  it("closes the connection when a streamed body is cancelled, even before its first read", async () => {
    // The openai client cancels an error answer's body unread before it retries.
    const closed: string[] = [];
    const base = await serve((req, _body, res) => {
      res.on("close", () => closed.push(req.url ?? ""));
      res.writeHead(req.url === "/unread" ? 500 : 200, { "content-type": "text/event-stream" });
      res.write("data: first\n\n");
      // Never ends: only the client can close these.
    });
    const fetchImpl = createNodeFetch();
    const unread = await fetchImpl(`${base}/unread`);
    await unread.body!.cancel();
    const started = await fetchImpl(`${base}/started`);
    const reader = started.body!.getReader();
    expect(Buffer.from((await reader.read()).value!).toString()).toBe("data: first\n\n");
    await reader.cancel();
    await vi.waitFor(() => expect(closed.sort()).toEqual(["/started", "/unread"]));
  });

  it("lets go of the answer and the signal once the body has ended or been cancelled", async () => {
    // What the web Response keeps of its body source: once read to its end, or cancelled, it must
    // no longer hold Node's answer (and through it the whole call) nor the call's signal.
    const read = async (cancel: boolean) => {
      const answer = Readable.from([Buffer.from("one"), Buffer.from("two")]);
      const controller = new AbortController();
      const body = chunksOf(answer, controller.signal);
      const chunks: string[] = [];
      for await (const chunk of body) {
        chunks.push(Buffer.from(chunk).toString());
        if (cancel) break;
      }
      expect(chunks).toEqual(cancel ? ["one"] : ["one", "two"]);
      return { body, answer: new WeakRef(answer), signal: new WeakRef(controller.signal) };
    };
    const ended = await read(false);
    const cancelled = await read(true);
    // A WeakRef holds its target until the job that made it ends.
    await new Promise((resolve) => setImmediate(resolve));
    v8FullCollection()();
    for (const { body, answer, signal } of [ended, cancelled]) {
      expect(body).toBeDefined();
      expect(answer.deref()).toBeUndefined();
      expect(signal.deref()).toBeUndefined();
    }
  });

  it("rejects with the connection error when nothing listens", async () => {
    const base = await serve((_req, _body, res) => res.end());
    const port = (server!.address() as AddressInfo).port;
    await new Promise((resolve) => server!.close(resolve));
    server = undefined;
    await expect(createNodeFetch()(`${base}/`)).rejects.toMatchObject({
      code: "ECONNREFUSED",
      port,
    });
  });
});
