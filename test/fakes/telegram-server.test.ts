import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { type FakeTelegram, startFakeTelegram } from "./telegram-server.js";

const TOKEN = "42:fake";
let fake: FakeTelegram;

beforeEach(async () => {
  fake = await startFakeTelegram({ token: TOKEN });
});

afterEach(async () => {
  await fake.close();
});

interface ApiBody {
  ok: boolean;
  description?: string;
  error_code?: number;
  parameters?: { retry_after?: number };
  result: unknown;
}

/** The message texts of a getUpdates answer. */
function texts(body: ApiBody): string[] {
  return (body.result as { message: { text: string } }[]).map((u) => u.message.text);
}

async function call(method: string, body: unknown = {}, token = TOKEN) {
  const res = await fetch(`${fake.apiRoot}/bot${token}/${method}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as ApiBody };
}

describe("fake Telegram getUpdates", () => {
  it("redelivers updates until an offset above them confirms them", async () => {
    const first = fake.sendUserMessage({ chatId: 1, text: "a" });
    fake.sendUserMessage({ chatId: 1, text: "b" });
    expect(texts((await call("getUpdates")).body)).toHaveLength(2);
    expect(texts((await call("getUpdates", { offset: first.update_id })).body)).toHaveLength(2);
    const after = await call("getUpdates", { offset: first.update_id + 1 });
    expect(texts(after.body)).toEqual(["b"]);
    expect(fake.confirmedOffset()).toBe(first.update_id + 1);
    // Going back does not bring a confirmed update back.
    expect(texts((await call("getUpdates", { offset: first.update_id })).body)).toHaveLength(1);
  });

  it("long-polls and wakes up as soon as an update arrives", async () => {
    const polling = call("getUpdates", { timeout: 20 });
    await new Promise((resolve) => setTimeout(resolve, 50));
    fake.sendUserMessage({ chatId: 1, text: "wake" });
    const { body } = await polling;
    expect(texts(body)).toEqual(["wake"]);
  });

  it("answers an overlapping poller with 409", async () => {
    const polling = call("getUpdates", { timeout: 20 });
    await fake.waitForSent((c) => c.method === "getUpdates");
    const second = await call("getUpdates", { timeout: 0 });
    expect(second.status).toBe(409);
    expect(second.body.description).toMatch(/Conflict: terminated by other getUpdates request/);
    fake.sendUserMessage({ chatId: 1, text: "release" });
    expect((await polling).status).toBe(200);
  });

  it("rejects a wrong token with 401 and unknown methods with 404", async () => {
    expect((await call("getMe", {}, "1:nope")).status).toBe(401);
    const unknown = await call("sendTelepathy");
    expect(unknown.status).toBe(404);
    expect(unknown.body.ok).toBe(false);
  });
});

describe("fake Telegram sendMessage", () => {
  it("validates HTML and the 4096-unit limit like Telegram", async () => {
    const bad = await call("sendMessage", { chat_id: 1, text: "<b>open", parse_mode: "HTML" });
    expect(bad.status).toBe(400);
    expect(bad.body.description).toMatch(/^Bad Request: can't parse entities/);
    const unknownTag = await call("sendMessage", {
      chat_id: 1,
      text: "<div>x</div>",
      parse_mode: "HTML",
    });
    expect(unknownTag.status).toBe(400);
    const long = await call("sendMessage", { chat_id: 1, text: "x".repeat(4097) });
    expect(long.body.description).toBe("Bad Request: message is too long");
    const good = await call("sendMessage", {
      chat_id: 1,
      text: '<b>hi</b> <a href="https://x.y">l</a> <pre><code class="language-ts">a &lt; b</code></pre>',
      parse_mode: "HTML",
    });
    expect(good.status).toBe(200);
    expect(fake.chatLog(1).map((m) => m.text)).toEqual(["hi l a < b"]);
  });

  it("accepts urlencoded and multipart bodies", async () => {
    await fetch(`${fake.apiRoot}/bot${TOKEN}/sendMessage`, {
      method: "POST",
      body: new URLSearchParams({
        chat_id: "5",
        text: "form",
        reply_parameters: '{"message_id":3}',
      }),
    });
    const form = new FormData();
    form.set("chat_id", "5");
    form.set("text", "multi ✓");
    form.set("message_thread_id", "9");
    await fetch(`${fake.apiRoot}/bot${TOKEN}/sendMessage`, { method: "POST", body: form });
    expect(fake.chatLog(5)).toMatchObject([
      { text: "form", replyToMessageId: 3 },
      { text: "multi ✓", threadId: 9 },
    ]);
  });

  it("records what each topic saw and applies edits", async () => {
    const sent = await call("sendMessage", { chat_id: -100, text: "draft", message_thread_id: 4 });
    await call("editMessageText", {
      chat_id: -100,
      message_id: (sent.body.result as { message_id: number }).message_id,
      text: "final",
    });
    expect(fake.chatLog(-100, 4)).toMatchObject([{ from: "bot", text: "final", edited: true }]);
    expect(fake.chatLog(-100, 5)).toEqual([]);
  });

  it("fails, drops or hangs the next call on request", async () => {
    fake.failNext("sendMessage", { error_code: 429, retry_after: 3 });
    const limited = await call("sendMessage", { chat_id: 1, text: "x" });
    expect(limited.body).toMatchObject({ error_code: 429, parameters: { retry_after: 3 } });
    fake.dropNextConnection("sendMessage");
    await expect(call("sendMessage", { chat_id: 1, text: "y" })).rejects.toThrow();
    expect(fake.chatLog(1)).toEqual([]);
    expect((await call("sendMessage", { chat_id: 1, text: "z" })).status).toBe(200);
  });
});
