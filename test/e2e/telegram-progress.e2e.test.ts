/**
 * Streamed replies across crashes, with the real gateway process: whatever moment a SIGKILL
 * hits, the chat ends with exactly one complete final answer, a cut-off preview says so, and a
 * reply that spilled into several messages never repeats a piece.
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { INTERRUPTED_MARK } from "../../src/platforms/stream-editor.js";
import { markdownToTelegramHtml, splitMessage } from "../../src/platforms/telegram/format.js";
import { type FakeOpenAI, type FakeStep, startFakeOpenAI } from "../fakes/openai-server.js";
import { type FakeTelegram, startFakeTelegram } from "../fakes/telegram-server.js";
import {
  bootedPids,
  type GatewayProcess,
  startGatewayProcess,
} from "../helpers/gateway-process.js";
import { createTempDir } from "../helpers/temp-home.js";
import { waitFor } from "../helpers/wait-for.js";

const TOKEN = "123456:E2E-progress";
const USER = 4242;
const MARK = INTERRUPTED_MARK.trim();

function sentences(count: number, word = "Sentence"): string {
  return Array.from({ length: count }, (_, i) => `${word} number ${i + 1} is here.`).join(" ");
}

describe("streamed replies across crashes (real processes)", () => {
  let home: ReturnType<typeof createTempDir>;
  let telegram: FakeTelegram;
  let model: FakeOpenAI;
  const spawned: GatewayProcess[] = [];

  beforeEach(async () => {
    home = createTempDir("keel-progress-e2e-");
    telegram = await startFakeTelegram({ token: TOKEN });
    model = await startFakeOpenAI();
  });

  afterEach(async () => {
    for (const gateway of spawned.splice(0)) await gateway.stop();
    await telegram.close();
    await model.close();
    home.cleanup();
  });

  async function start(crashPoint?: string): Promise<GatewayProcess> {
    const boots = bootedPids(home.path).length;
    const gateway = await startGatewayProcess({
      home: home.path,
      env: {
        TELEGRAM_BOT_TOKEN: TOKEN,
        TELEGRAM_API_ROOT: telegram.apiRoot,
        TELEGRAM_ALLOWED_USERS: String(USER),
        OPENAI_BASE_URL: model.baseUrl,
        KEEL_MODEL: "fake-model",
        KEEL_HTTP_PORT: "0",
        KEEL_API_ENABLED: "false",
        KEEL_WEBCHAT_ENABLED: "false",
      },
      ...(crashPoint && { crashPoint }),
    });
    spawned.push(gateway);
    await waitFor(() => bootedPids(home.path).length > boots, {
      timeoutMs: 20_000,
      message: `gateway running\n${gateway.output().slice(-2000)}`,
    });
    return gateway;
  }

  const bot = () => telegram.chatLog(USER).filter((e) => e.from === "bot");

  /** The first request streams `first` slowly; every later one answers `later` at once. */
  function scriptFirstThen(first: FakeStep, later: FakeStep): void {
    let calls = 0;
    model.script(() => (++calls === 1 ? first : later));
  }

  it("SIGKILL mid-stream: the cut-off message says so, and the resumed answer comes once", async () => {
    const partial = sentences(80);
    scriptFirstThen({ text: partial, chunkDelayMs: 150 }, { text: "The resumed answer." });
    const gateway = await start();
    telegram.sendUserMessage({ chatId: USER, text: "write a long answer" });
    const seen = await waitFor(() => {
      const [message] = bot();
      return message && message.text.length > 60 ? message.text : null;
    });
    gateway.kill("SIGKILL");
    await gateway.waitForExit(10_000);
    await start();
    await waitFor(() => bot().some((m) => m.text === "The resumed answer."), {
      timeoutMs: 30_000,
      message: `resumed answer; chat: ${JSON.stringify(bot().map((m) => m.text))}`,
    });
    const cut = await waitFor(() => bot().find((m) => m.text.endsWith(MARK)), {
      timeoutMs: 15_000,
      message: `interrupted mark; chat: ${JSON.stringify(bot().map((m) => m.text))}`,
    });
    // The mark keeps what the user had already seen.
    expect(cut.text.startsWith(seen)).toBe(true);
    expect(partial.startsWith(cut.text.slice(0, -INTERRUPTED_MARK.length))).toBe(true);
    expect(bot().filter((m) => m.text === "The resumed answer.")).toHaveLength(1);
    // No other message looks like (a part of) an answer.
    const previews = bot().filter((m) => m.text.startsWith("Sentence"));
    expect(previews).toHaveLength(1);
  });

  it("SIGKILL after the reply was queued: the streamed message becomes the reply, once", async () => {
    const reply = sentences(30);
    model.script({ text: reply, chunkDelayMs: 120 });
    const gateway = await start("after_reply_queued");
    telegram.sendUserMessage({ chatId: USER, text: "write an answer" });
    await waitFor(() => bot()[0], { timeoutMs: 15_000, message: "preview shown" });
    await gateway.waitForExit(30_000);
    expect(bot()[0]!.text).not.toBe(reply);
    await start();
    await waitFor(() => bot().some((m) => m.text === reply), {
      timeoutMs: 30_000,
      message: `final reply; chat: ${JSON.stringify(bot().map((m) => m.text))}`,
    });
    const answers = bot().filter((m) => m.text.startsWith("Sentence"));
    expect(answers).toHaveLength(1);
    expect(answers[0]!.edited).toBe(true);
    expect(answers[0]!.text.includes(MARK)).toBe(false);
  });

  it("SIGKILL while a long reply is sent in pieces: no piece is sent twice", async () => {
    writeFileSync(join(home.path, "config.yaml"), "display:\n  streaming: false\n");
    const words = Array.from({ length: 2200 }, (_, i) => `w${i % 10}rd`).join(" ");
    const reply = words.slice(0, 10_400);
    const pieces = splitMessage(markdownToTelegramHtml(reply));
    expect(pieces.length).toBe(3);
    model.script({ text: reply });
    // The third piece meets a long flood wait: the gateway waits in it when it is killed.
    telegram.failNext("sendMessage", { error_code: 429, retry_after: 30, afterCalls: 2 });
    const gateway = await start();
    telegram.sendUserMessage({ chatId: USER, text: "write even more" });
    await waitFor(
      () => telegram.sent.some((c) => c.method === "sendMessage" && c.errorCode === 429),
      {
        timeoutMs: 15_000,
        message: "third piece refused",
      },
    );
    expect(bot()).toHaveLength(2);
    gateway.kill("SIGKILL");
    await gateway.waitForExit(10_000);
    await start();
    await waitFor(() => bot().length >= 3, {
      timeoutMs: 30_000,
      message: `third piece; chat: ${bot().length} messages`,
    });
    expect(bot().map((m) => m.rawText)).toEqual(pieces);
  });
});
