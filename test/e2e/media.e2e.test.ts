/**
 * Media against the real gateway process, killed with SIGKILL mid-turn: a file is downloaded
 * and transcribed once, answered once, and a file the agent sends arrives once.
 */
import { mkdirSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  defaultScript,
  type FakeChatRequest,
  type FakeOpenAI,
  imagePartsOf,
  lastUserText,
  startFakeOpenAI,
} from "../fakes/openai-server.js";
import { type FakeTelegram, startFakeTelegram } from "../fakes/telegram-server.js";
import {
  assertBuilt,
  freePort,
  type GatewayProcess,
  startGatewayProcess,
} from "../helpers/gateway-process.js";
import { createTempDir } from "../helpers/temp-home.js";
import { waitFor } from "../helpers/wait-for.js";

const TOKEN = "123456:E2E-media";
const USER = 4242;
const PNG = Buffer.from(
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==",
  "base64",
);

describe("media across SIGKILL (real processes)", () => {
  let home: ReturnType<typeof createTempDir>;
  let telegram: FakeTelegram;
  let model: FakeOpenAI;
  let port: number;
  const spawned: GatewayProcess[] = [];

  beforeEach(async () => {
    assertBuilt();
    home = createTempDir("keel-media-e2e-");
    telegram = await startFakeTelegram({ token: TOKEN });
    model = await startFakeOpenAI();
    port = await freePort();
  });

  afterEach(async () => {
    for (const gateway of spawned.splice(0)) await gateway.stop();
    await telegram.close();
    await model.close();
    home.cleanup();
  });

  async function start(crashPoint?: string): Promise<GatewayProcess> {
    const gateway = await startGatewayProcess({
      home: home.path,
      port,
      env: {
        TELEGRAM_BOT_TOKEN: TOKEN,
        TELEGRAM_API_ROOT: telegram.apiRoot,
        TELEGRAM_ALLOWED_USERS: String(USER),
        OPENAI_BASE_URL: model.baseUrl,
        KEEL_MODEL: "fake-model",
      },
      ...(crashPoint && { crashPoint }),
    });
    spawned.push(gateway);
    await gateway.waitForReady(20_000);
    return gateway;
  }

  const bot = () => telegram.chatLog(USER).filter((entry) => entry.from === "bot");
  const botTexts = () => bot().map((entry) => entry.text);
  const replies = () => botTexts().filter((t) => t.startsWith("ok:"));

  it("a voice note killed after its transcription is transcribed once and answered once", async () => {
    // Media steps: 1 = the download, 2 = the transcript.
    const first = await start("after_media_step:2");
    const sent = telegram.sendUserFile({
      chatId: USER,
      kind: "voice",
      bytes: Buffer.from("call the plumber tomorrow"),
    });
    expect(await first.exitsWithin(20_000)).toBe(true);
    expect(first.exitStatus?.signal).toBe("SIGKILL");
    expect(model.transcriptions).toHaveLength(1);
    expect(model.requests).toHaveLength(0);

    await start();
    await waitFor(() => replies().length === 1, {
      timeoutMs: 20_000,
      message: `one reply; chat: ${JSON.stringify(botTexts())}`,
    });
    expect(model.transcriptions).toHaveLength(1);
    expect(telegram.downloads(sent.file_id)).toBe(1);
    expect(lastUserText(model.requests.at(-1)!)).toContain("call the plumber tomorrow");
    expect(botTexts().filter((t) => t.startsWith("🎤"))).toEqual([
      "🎤 “call the plumber tomorrow”",
    ]);
    // Quiet for a moment longer: nothing is answered twice.
    await new Promise((r) => setTimeout(r, 500));
    expect(replies()).toHaveLength(1);
    const inbox = join(home.path, "workspace", "inbox");
    expect(readdirSync(inbox).flatMap((s) => readdirSync(join(inbox, s)))).toHaveLength(1);
  });

  it("a photo killed after its download is fetched once and reaches the model as an image", async () => {
    const first = await start("after_media_step:1");
    const sent = telegram.sendUserFile({ chatId: USER, kind: "photo", bytes: PNG, caption: "hm?" });
    expect(await first.exitsWithin(20_000)).toBe(true);
    await start();
    await waitFor(() => replies().length === 1, { timeoutMs: 20_000, message: "one reply" });
    expect(telegram.downloads(sent.file_id)).toBe(1);
    expect(imagePartsOf(model.requests.at(-1)!)).toEqual([
      `data:image/jpeg;base64,${PNG.toString("base64")}`,
    ]);
  });

  it("a 25 MB document gets the clear reply and its caption is answered", async () => {
    await start();
    telegram.sendUserFile({
      chatId: USER,
      kind: "document",
      bytes: Buffer.from("pretend"),
      reportedSize: 25 * 1_048_576,
      fileName: "backup.tar",
      caption: "here you go",
    });
    await waitFor(() => replies().length === 1, { timeoutMs: 20_000, message: "a reply" });
    expect(botTexts().find((t) => t.includes("backup.tar is too large"))).toBeDefined();
  });

  it("send_file killed between queueing and sending delivers the file exactly once", async () => {
    model.script((request: FakeChatRequest) => {
      const lastUser = request.messages.findLastIndex((m) => m.role === "user");
      const answered = request.messages.slice(lastUser + 1).some((m) => m.role === "tool");
      if (lastUserText(request) !== "send the picture") {
        return answered ? { text: "sent it" } : defaultScript(request);
      }
      return answered
        ? { text: "sent it" }
        : { toolCalls: [{ name: "send_file", arguments: { path: "pic.png", caption: "pic" } }] };
    });
    mkdirSync(join(home.path, "workspace"), { recursive: true });
    writeFileSync(join(home.path, "workspace", "pic.png"), PNG);
    // after_tool_finished: the tool's result and the file's outbox row are committed, not sent.
    const first = await start("after_tool_finished");
    telegram.sendUserMessage({ chatId: USER, text: "send the picture" });
    expect(await first.exitsWithin(20_000)).toBe(true);
    expect(telegram.sent.filter((c) => c.method === "sendPhoto")).toEqual([]);

    await start();
    await waitFor(() => botTexts().includes("sent it"), {
      timeoutMs: 20_000,
      message: `resumed reply; chat: ${JSON.stringify(botTexts())}`,
    });
    await waitFor(() => bot().some((e) => e.file), { timeoutMs: 20_000, message: "the photo" });
    await new Promise((r) => setTimeout(r, 500));
    const photos = telegram.sent.filter((c) => c.method === "sendPhoto" && c.ok);
    expect(photos).toHaveLength(1);
    expect(
      bot()
        .filter((e) => e.file)
        .map((e) => [e.file!.name, e.text]),
    ).toEqual([["pic.png", "pic"]]);
  });
});
