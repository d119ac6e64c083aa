import OpenAI from "openai";
import { afterEach, describe, expect, it } from "vitest";
import {
  defaultScript,
  type FakeOpenAI,
  fakePromptTokens,
  startFakeOpenAI,
} from "./openai-server.js";

let fake: FakeOpenAI;

afterEach(async () => {
  await fake.close();
});

function client(): OpenAI {
  return new OpenAI({ baseURL: fake.baseUrl, apiKey: "k", maxRetries: 0, logLevel: "off" });
}

async function readSse(response: Response): Promise<string[]> {
  const text = await response.text();
  return text
    .split("\n\n")
    .filter((frame) => frame.startsWith("data: "))
    .map((frame) => frame.slice("data: ".length));
}

describe("fake OpenAI server", () => {
  it("answers non-streaming requests in OpenAI's JSON format", async () => {
    fake = await startFakeOpenAI();
    const completion = await client().chat.completions.create({
      model: "gpt-test",
      messages: [{ role: "user", content: "echo: plain json" }],
    });
    expect(completion.object).toBe("chat.completion");
    expect(completion.model).toBe("gpt-test");
    expect(completion.choices[0]).toMatchObject({
      index: 0,
      finish_reason: "stop",
      message: { role: "assistant", content: "plain json" },
    });
    expect(completion.usage?.total_tokens).toBeGreaterThan(0);
  });

  it("streams tool calls with arguments split over several chunks, then [DONE]", async () => {
    fake = await startFakeOpenAI();
    const response = await fetch(`${fake.baseUrl}/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        model: "m",
        stream: true,
        stream_options: { include_usage: true },
        messages: [{ role: "user", content: "run: ls -la /tmp" }],
      }),
    });
    expect(response.headers.get("content-type")).toContain("text/event-stream");
    const frames = await readSse(response);
    expect(frames.at(-1)).toBe("[DONE]");
    const chunks = frames.slice(0, -1).map((f) => JSON.parse(f));
    expect(chunks.every((c) => c.object === "chat.completion.chunk")).toBe(true);
    const argumentPieces = chunks.flatMap(
      (c) =>
        c.choices[0]?.delta.tool_calls?.map(
          (t: { function: { arguments: string } }) => t.function.arguments,
        ) ?? [],
    );
    expect(argumentPieces.filter((p: string) => p.length > 0).length).toBeGreaterThan(2);
    expect(JSON.parse(argumentPieces.join(""))).toEqual({ command: "ls -la /tmp" });
    const finishes = chunks.map((c) => c.choices[0]?.finish_reason).filter(Boolean);
    expect(finishes).toEqual(["tool_calls"]);
    expect(chunks.at(-1).choices).toEqual([]);
    expect(chunks.at(-1).usage.total_tokens).toBeGreaterThan(0);
  });

  it("streams a step's pieces one content chunk each, and answers their text whole unstreamed", async () => {
    fake = await startFakeOpenAI();
    const pieces = Array.from({ length: 200 }, (_, i) => `p${i} `);
    fake.script({ pieces });
    const stream = await client().chat.completions.create({
      model: "m",
      stream: true,
      messages: [{ role: "user", content: "long" }],
    });
    const contents: string[] = [];
    for await (const chunk of stream) {
      const content = chunk.choices[0]?.delta.content;
      if (content) contents.push(content);
    }
    expect(contents).toEqual(pieces);
    const whole = await client().chat.completions.create({
      model: "m",
      messages: [{ role: "user", content: "long" }],
    });
    expect(whole.choices[0]?.message.content).toBe(pieces.join(""));
  });

  it("lists its model and answers unknown routes with an OpenAI error", async () => {
    fake = await startFakeOpenAI({ model: "keel-test" });
    const models = await client().models.list();
    expect(models.data.map((m) => m.id)).toEqual(["keel-test"]);
    const response = await fetch(`${fake.baseUrl}/embeddings`, { method: "POST", body: "{}" });
    expect(response.status).toBe(404);
    expect(((await response.json()) as { error: { message: string } }).error.message).toContain(
      "Unknown route",
    );
  });

  it("uses scripted steps in order, then falls back to the default script", async () => {
    fake = await startFakeOpenAI();
    fake.script([{ text: "first" }, { text: "second" }]);
    const ask = async (content: string) =>
      (
        await client().chat.completions.create({
          model: "m",
          messages: [{ role: "user", content }],
        })
      ).choices[0]?.message.content;
    expect(await ask("a")).toBe("first");
    expect(await ask("b")).toBe("second");
    expect(await ask("c")).toBe("ok: c");
    fake.script((request) => ({
      ...defaultScript(request),
      text: `custom ${request.messages.length}`,
    }));
    expect(await ask("d")).toBe("custom 1");
    expect(fake.requests).toHaveLength(4);
  });

  it("fails the next request only, with an error JSON or the raw body given", async () => {
    fake = await startFakeOpenAI();
    fake.failNext(503);
    fake.failNext(502, "<html>bad gateway</html>");
    const post = () =>
      fetch(`${fake.baseUrl}/chat/completions`, {
        method: "POST",
        body: JSON.stringify({ model: "m", messages: [{ role: "user", content: "echo: x" }] }),
      });
    const first = await post();
    expect(first.status).toBe(503);
    expect(((await first.json()) as { error: { type: string } }).error.type).toBe("server_error");
    const second = await post();
    expect(second.status).toBe(502);
    expect(await second.text()).toBe("<html>bad gateway</html>");
    expect((await post()).status).toBe(200);
  });

  it("with a context length: lists it, counts usage as it counts the limit, and refuses a longer prompt like OpenAI", async () => {
    fake = await startFakeOpenAI({ contextLength: 1024 });
    const models = await client().models.list();
    expect(models.data[0]).toMatchObject({ id: "fake-model", context_length: 1024 });
    const fits = await client().chat.completions.create({
      model: "m",
      messages: [{ role: "user", content: "echo: short" }],
    });
    expect(fits.usage?.prompt_tokens).toBe(fakePromptTokens(fake.requests[0]!));
    const error = await client()
      .chat.completions.create({
        model: "m",
        messages: [{ role: "user", content: "x".repeat(5_000) }],
      })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpenAI.APIError);
    expect((error as InstanceType<typeof OpenAI.APIError>).status).toBe(400);
    expect((error as InstanceType<typeof OpenAI.APIError>).code).toBe("context_length_exceeded");
  });

  it("sends failNext's headers (Retry-After), and summarises when the last message asks to", async () => {
    fake = await startFakeOpenAI();
    fake.failNext(429, undefined, { "retry-after": "7" });
    const post = (messages: unknown) =>
      fetch(`${fake.baseUrl}/chat/completions`, {
        method: "POST",
        body: JSON.stringify({ model: "m", messages }),
      });
    const limited = await post([{ role: "user", content: "echo: x" }]);
    expect(limited.status).toBe(429);
    expect(limited.headers.get("retry-after")).toBe("7");
    const summary = await post([
      { role: "system", content: "earlier: remember: a=1" },
      { role: "user", content: "remember: b=2 and more. Please summarise." },
    ]);
    const body = (await summary.json()) as { choices: Array<{ message: { content: string } }> };
    expect(body.choices[0]!.message.content).toBe(
      "Summary of the earlier conversation. remember: a=1. remember: b=2.",
    );
  });

  it("paces the content pieces of a stream with chunkDelayMs", async () => {
    fake = await startFakeOpenAI();
    fake.script({ text: "abcdefghij", chunkDelayMs: 400 });
    const response = await fetch(`${fake.baseUrl}/chat/completions`, {
      method: "POST",
      body: JSON.stringify({
        model: "m",
        stream: true,
        messages: [{ role: "user", content: "x" }],
      }),
    });
    const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader();
    const first = await reader.read();
    expect(first.value).not.toContain('"ij"');
    let rest = "";
    for (let r = await reader.read(); !r.done; r = await reader.read()) rest += r.value;
    const frames = `${first.value}${rest}`.split("\n\n").filter((f) => f.startsWith("data: {"));
    const text = frames.map((f) => JSON.parse(f.slice(6)).choices[0]?.delta.content ?? "").join("");
    expect(text).toBe("abcdefghij");
  });

  it("sends a broken stream for garbage", async () => {
    fake = await startFakeOpenAI();
    const response = await fetch(`${fake.baseUrl}/chat/completions`, {
      method: "POST",
      body: JSON.stringify({
        model: "m",
        stream: true,
        messages: [{ role: "user", content: "garbage" }],
      }),
    });
    const frames = await readSse(response);
    expect(() => frames.map((f) => JSON.parse(f))).toThrow();
    expect(frames).not.toContain("[DONE]");
  });

  it("drops a held response when closed", async () => {
    fake = await startFakeOpenAI();
    fake.hangNext();
    const pending = fetch(`${fake.baseUrl}/chat/completions`, {
      method: "POST",
      body: JSON.stringify({ model: "m", messages: [{ role: "user", content: "echo: x" }] }),
    });
    const outcome = pending.then(
      () => "answered",
      () => "dropped",
    );
    await fake.close();
    expect(await outcome).toBe("dropped");
    fake = await startFakeOpenAI();
  });
});
