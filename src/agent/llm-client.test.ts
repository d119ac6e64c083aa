import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { type FakeOpenAI, startFakeOpenAI } from "../../test/fakes/openai-server.js";
import { waitFor } from "../../test/helpers/wait-for.js";
import { createLlmClient, parseRetryAfter } from "./llm-client.js";
import type { ChatMessage, LlmClient, ToolSpec } from "./types.js";

const terminalSpec: ToolSpec = {
  type: "function",
  function: {
    name: "terminal",
    description: "Run a shell command",
    parameters: { type: "object", properties: { command: { type: "string" } } },
  },
};

let fake: FakeOpenAI;

afterEach(async () => {
  await fake?.close();
});

async function setup(options: { timeoutMs?: number; apiKey?: string } = {}): Promise<LlmClient> {
  fake = await startFakeOpenAI({ apiKey: options.apiKey });
  return createLlmClient({
    baseUrl: fake.baseUrl,
    apiKey: options.apiKey,
    model: "test-model",
    timeoutMs: options.timeoutMs ?? 10_000,
  });
}

function user(text: string): ChatMessage[] {
  return [
    { role: "system", content: "You are a test." },
    { role: "user", content: text },
  ];
}

describe("createLlmClient", () => {
  it("streams text, reporting each delta, and returns the whole assistant message", async () => {
    const llm = await setup();
    const deltas: string[] = [];
    const result = await llm.complete({
      messages: user("echo: hello from the fake model"),
      tools: [terminalSpec],
      signal: new AbortController().signal,
      onTextDelta: (text) => deltas.push(text),
    });
    expect(result).toEqual({
      ok: true,
      message: { role: "assistant", content: "hello from the fake model" },
      finishReason: "stop",
      // The fake counts a quarter of the request's characters, as its usage chunk reports.
      usage: { promptTokens: expect.any(Number), completionTokens: 7, estimated: false },
    });
    expect(fake.requests[0]?.stream_options).toEqual({ include_usage: true });
    expect(deltas.length).toBeGreaterThan(2);
    expect(deltas.join("")).toBe("hello from the fake model");
    const sent = fake.requests[0]!;
    expect(sent.stream).toBe(true);
    expect(sent.model).toBe("test-model");
    expect(sent.tools?.[0]?.function.name).toBe("terminal");
    expect(sent.messages[0]).toEqual({ role: "system", content: "You are a test." });
  });

  it("reassembles tool calls whose arguments arrive split across chunks, in index order", async () => {
    const llm = await setup();
    const first = { command: "printf 'a long enough command to be split into pieces'" };
    fake.script({
      toolCalls: [
        { name: "terminal", arguments: first },
        { name: "read_file", arguments: { path: "notes/today.md" } },
      ],
    });
    const result = await llm.complete({
      messages: user("do things"),
      tools: [terminalSpec],
      signal: new AbortController().signal,
    });
    if (!result.ok) throw new Error(result.error);
    expect(result.finishReason).toBe("tool_calls");
    expect(result.message.content).toBeNull();
    const calls = result.message.tool_calls ?? [];
    expect(calls.map((c) => c.function.name)).toEqual(["terminal", "read_file"]);
    expect(JSON.parse(calls[0]!.function.arguments)).toEqual(first);
    expect(JSON.parse(calls[1]!.function.arguments)).toEqual({ path: "notes/today.md" });
    expect(calls[0]!.id).not.toBe(calls[1]!.id);
    expect(calls[0]!.type).toBe("function");
  });

  it("sends assistant tool calls and tool results back in the wire format", async () => {
    const llm = await setup();
    const call = {
      id: "call_1",
      type: "function" as const,
      function: { name: "terminal", arguments: '{"command":"echo hi"}' },
    };
    const result = await llm.complete({
      messages: [
        { role: "user", content: "run: echo hi" },
        { role: "assistant", content: null, tool_calls: [call] },
        { role: "tool", tool_call_id: "call_1", content: "hi\n[exit code 0]" },
      ],
      tools: [terminalSpec],
      signal: new AbortController().signal,
    });
    expect(result.ok && result.message.content).toBe("ran: hi");
    expect(fake.requests[0]!.messages[1]).toEqual({
      role: "assistant",
      content: null,
      tool_calls: [call],
    });
  });

  it("returns an http failure with the status for a 500, without retrying", async () => {
    const llm = await setup();
    fake.failNext(500);
    const result = await llm.complete({
      messages: user("echo: x"),
      tools: [],
      signal: new AbortController().signal,
    });
    expect(result).toMatchObject({ ok: false, kind: "http", status: 500 });
    expect(!result.ok && result.error).toContain("HTTP 500");
    expect(fake.requests).toHaveLength(1);
  });

  it("keeps the API key out of error messages", async () => {
    const apiKey = "sk-test-abcdef123456789";
    const llm = await setup({ apiKey });
    fake.failNext(401, { error: { message: `Incorrect API key provided: ${apiKey}.` } });
    const result = await llm.complete({
      messages: user("echo: x"),
      tools: [],
      signal: new AbortController().signal,
    });
    expect(result).toMatchObject({ ok: false, kind: "http", status: 401 });
    expect(!result.ok && result.error).not.toContain("abcdef123456789");
  });

  it("is rejected by a server expecting another key", async () => {
    fake = await startFakeOpenAI({ apiKey: "right-key" });
    const llm = createLlmClient({
      baseUrl: fake.baseUrl,
      apiKey: "wrong-key",
      model: "m",
      timeoutMs: 5000,
    });
    const result = await llm.complete({
      messages: user("echo: x"),
      tools: [],
      signal: new AbortController().signal,
    });
    expect(result).toMatchObject({ ok: false, kind: "http", status: 401 });
  });

  it("times out a response that never comes", async () => {
    const llm = await setup({ timeoutMs: 300 });
    fake.hangNext();
    const result = await llm.complete({
      messages: user("echo: x"),
      tools: [],
      signal: new AbortController().signal,
    });
    expect(result).toMatchObject({ ok: false, kind: "timeout" });
  });

  it("times out a stream that stalls after its headers", async () => {
    const llm = await setup({ timeoutMs: 300 });
    const result = await llm.complete({
      messages: user("slow: 20000 late"),
      tools: [],
      signal: new AbortController().signal,
    });
    expect(result).toMatchObject({ ok: false, kind: "timeout" });
  });

  it("returns aborted when the caller aborts a waiting request", async () => {
    const llm = await setup();
    fake.hangNext();
    const controller = new AbortController();
    const pending = llm.complete({
      messages: user("echo: x"),
      tools: [],
      signal: controller.signal,
    });
    await waitFor(() => fake.requests.length === 1, { timeoutMs: 5000 });
    controller.abort();
    expect(await pending).toMatchObject({ ok: false, kind: "aborted" });
  });

  it("returns aborted when the caller aborts mid-stream, and at once when already aborted", async () => {
    const llm = await setup();
    const controller = new AbortController();
    const pending = llm.complete({
      messages: user("slow: 20000 late"),
      tools: [],
      signal: controller.signal,
    });
    await waitFor(() => fake.requests.length === 1, { timeoutMs: 5000 });
    controller.abort();
    expect(await pending).toMatchObject({ ok: false, kind: "aborted" });
    const again = await llm.complete({
      messages: user("echo: x"),
      tools: [],
      signal: controller.signal,
    });
    expect(again).toMatchObject({ ok: false, kind: "aborted" });
    expect(fake.requests).toHaveLength(1);
  });

  it("returns invalid for a broken stream", async () => {
    const llm = await setup();
    const result = await llm.complete({
      messages: user("garbage"),
      tools: [],
      signal: new AbortController().signal,
    });
    expect(result).toMatchObject({ ok: false, kind: "invalid" });
  });

  it("returns invalid for a response with neither text nor tool calls", async () => {
    const llm = await setup();
    fake.script({ text: "" });
    const result = await llm.complete({
      messages: user("anything"),
      tools: [],
      signal: new AbortController().signal,
    });
    expect(result).toMatchObject({ ok: false, kind: "invalid" });
  });

  it("a failed load of the SDK is an invalid failure, and the next call loads it again", async () => {
    fake = await startFakeOpenAI();
    let loads = 0;
    const llm = createLlmClient({
      baseUrl: fake.baseUrl,
      model: "m",
      timeoutMs: 5000,
      loadSdk: () => {
        loads += 1;
        // The first load finds the package's file gone (an upgrade replaced it meanwhile).
        return loads === 1 ? Promise.reject(new Error("ENOENT: openai chunk")) : import("openai");
      },
    });
    const call = () =>
      llm.complete({ messages: user("echo: hi"), tools: [], signal: new AbortController().signal });
    expect(await call()).toMatchObject({ ok: false, kind: "invalid" });
    expect(await call()).toMatchObject({ ok: true });
    expect(loads).toBe(2);
  });

  it("returns a network failure when nothing listens", async () => {
    fake = await startFakeOpenAI();
    const baseUrl = fake.baseUrl;
    await fake.close();
    const llm = createLlmClient({ baseUrl, model: "m", timeoutMs: 5000 });
    const result = await llm.complete({
      messages: user("echo: x"),
      tools: [],
      signal: new AbortController().signal,
    });
    expect(result).toMatchObject({ ok: false, kind: "network" });
    expect(!result.ok && result.error).toMatch(/ECONNREFUSED/);
  });

  it("returns a network failure (retried by the chain) when the connection drops mid-stream", async () => {
    const server = createServer((req, res) => {
      req.resume();
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.write(
        `data: ${JSON.stringify({ choices: [{ index: 0, delta: { role: "assistant" } }] })}\n\n`,
      );
      setTimeout(() => res.destroy(), 20);
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    try {
      const port = (server.address() as AddressInfo).port;
      const llm = createLlmClient({
        baseUrl: `http://127.0.0.1:${port}/v1`,
        model: "m",
        timeoutMs: 5000,
      });
      const result = await llm.complete({
        messages: user("anything"),
        tools: [],
        signal: new AbortController().signal,
      });
      expect(result).toEqual({
        ok: false,
        kind: "network",
        error: "The connection to the model endpoint broke during the response.",
      });
    } finally {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });
});

describe("parseRetryAfter", () => {
  it("reads seconds and HTTP dates, and ignores what it cannot read", () => {
    const now = Date.parse("2026-11-26T06:00:00Z");
    expect(parseRetryAfter("3", now)).toBe(3_000);
    expect(parseRetryAfter("0", now)).toBe(0);
    expect(parseRetryAfter("Thu, 26 Nov 2026 06:00:10 GMT", now)).toBe(10_000);
    expect(parseRetryAfter("Thu, 26 Nov 2026 05:00:00 GMT", now)).toBe(0);
    expect(parseRetryAfter("soon", now)).toBeUndefined();
    expect(parseRetryAfter(null, now)).toBeUndefined();
  });
});
