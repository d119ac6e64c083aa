/**
 * Budgets end to end: the real gateway process, the stand-in Telegram Bot API and model. A spent
 * budget pauses the turn with a card; a SIGKILL while it waits loses neither the message nor the
 * pause: the restarted gateway asks again, and the button (even the old card's) lets it go on.
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { type FakeOpenAI, startFakeOpenAI } from "../fakes/openai-server.js";
import { type FakeTelegram, startFakeTelegram } from "../fakes/telegram-server.js";
import {
  bootedPids,
  freePort,
  type GatewayProcess,
  runKeel,
  startGatewayProcess,
} from "../helpers/gateway-process.js";
import { createTempDir } from "../helpers/temp-home.js";
import { waitFor } from "../helpers/wait-for.js";

const TOKEN = "123456:E2E-budgets";
/** Allowed, and an operator (admin) in their own chat: they may answer the pause. */
const USER = 4242;

describe("budgets (real process, stand-in Telegram)", () => {
  let home: ReturnType<typeof createTempDir>;
  let telegram: FakeTelegram;
  let model: FakeOpenAI;
  let port: number;
  const spawned: GatewayProcess[] = [];

  beforeEach(async () => {
    home = createTempDir("keel-budgets-e2e-");
    telegram = await startFakeTelegram({ token: TOKEN });
    model = await startFakeOpenAI();
    port = await freePort();
    // One token a day per chat: the first model call spends it, the next waits.
    writeFileSync(
      join(home.path, "config.yaml"),
      "budgets:\n  - { scope: chat, period: day, tokens: 1 }\n",
    );
  });

  afterEach(async () => {
    for (const gateway of spawned.splice(0)) await gateway.stop();
    await telegram.close();
    await model.close();
    home.cleanup();
  });

  async function start(): Promise<GatewayProcess> {
    const gateway = await startGatewayProcess({
      home: home.path,
      env: {
        TELEGRAM_BOT_TOKEN: TOKEN,
        TELEGRAM_API_ROOT: telegram.apiRoot,
        TELEGRAM_ALLOWED_USERS: String(USER),
        TELEGRAM_ADMIN_USERS: String(USER),
        OPENAI_BASE_URL: model.baseUrl,
        KEEL_MODEL: "fake-model",
        KEEL_HTTP_PORT: String(port),
      },
    });
    spawned.push(gateway);
    const boots = bootedPids(home.path).length;
    await waitFor(() => bootedPids(home.path).length > boots, {
      timeoutMs: 20_000,
      message: `gateway running\n${gateway.output().slice(-2000)}`,
    });
    return gateway;
  }

  const botLog = () => telegram.chatLog(USER).filter((e) => e.from === "bot");
  const texts = () => botLog().map((e) => e.text);
  const reply = (text: string) =>
    waitFor(() => texts().includes(text), {
      timeoutMs: 20_000,
      message: `reply "${text}"; chat: ${JSON.stringify(texts())}`,
    });
  /** The cards (bot messages with buttons) sent for pause `id`, or for any budget pause. */
  const cards = (id?: string) =>
    botLog().filter((e) =>
      e.sentButtons
        ?.flat()
        .some((b) =>
          id ? b.callback_data === `approve:${id}` : /^approve:b-/.test(b.callback_data ?? ""),
        ),
    );

  it("SIGKILL while paused: the message and the pause survive; the old card's button lets the turn go on", async () => {
    const first = await start();
    telegram.sendUserMessage({ chatId: USER, text: "echo: first", firstName: "Ada" });
    await reply("first");
    telegram.sendUserMessage({ chatId: USER, text: "echo: second", firstName: "Ada" });
    await waitFor(() => cards().length > 0, {
      timeoutMs: 20_000,
      message: `pause card; chat: ${JSON.stringify(texts())}`,
    });
    const card = cards()[0]!;
    const data = card.sentButtons!.flat();
    const id = /approve:(b-[0-9a-f]{10})/.exec(data.map((b) => b.callback_data).join(" "))![1]!;
    expect(data.map((b) => b.callback_data)).toEqual([
      `approve:${id}`,
      `approve_session:${id}`,
      `deny:${id}`,
    ]);
    expect(data.map((b) => b.text)).toContain("⬆ Raise for the period");
    expect(card.text).toContain("Paused: the chat budget per day");
    expect(model.requests).toHaveLength(1);

    first.kill("SIGKILL");
    await first.waitForExit(10_000);
    const second = await start();
    // Asked again after the restart, with the same pause.
    await waitFor(() => cards(id).length >= 2, {
      timeoutMs: 20_000,
      message: `asked again; chat: ${JSON.stringify(texts())}`,
    });
    const usage = (await (await second.control("/api/usage")).json()) as {
      pauses: { id: string }[];
    };
    expect(usage.pauses.map((p) => p.id)).toEqual([id]);
    expect(model.requests).toHaveLength(1);

    telegram.pressButton({
      chatId: USER,
      messageId: card.messageId,
      userId: USER,
      data: `approve:${id}`,
      firstName: "Ada",
    });
    await reply("second");
    // The kept message reached the model once, after the answer.
    expect(model.requests).toHaveLength(2);
    const asked = model.requests
      .flatMap((r) => r.messages)
      .filter((m) => m.content === "echo: second");
    expect(asked.length).toBeGreaterThan(0);
  });

  it("keel usage shows each budget per key and the pause; keel approvals raise and deny answer pauses", async () => {
    const gateway = await start();
    const cli = (args: string[]) =>
      runKeel({ home: home.path, args, env: { KEEL_HTTP_PORT: String(port) } });
    telegram.sendUserMessage({ chatId: USER, text: "echo: first" });
    await reply("first");
    telegram.sendUserMessage({ chatId: USER, text: "echo: second" });
    await waitFor(() => cards().length === 1, { timeoutMs: 20_000, message: "pause card" });
    const json = await cli(["usage", "--json"]);
    expect(json.code).toBe(0);
    const report = JSON.parse(json.stdout) as {
      budgets: {
        id: string;
        standings: { key: string; used_up: boolean; left_tokens: number }[];
      }[];
      chats: { key: string; day_tokens: number }[];
      pauses: { id: string; budget: string; key: string }[];
    };
    expect(report.budgets[0]!.id).toBe("chat:day");
    expect(report.budgets[0]!.standings).toMatchObject([
      { key: `telegram:${USER}`, used_up: true, left_tokens: 0 },
    ]);
    expect(report.chats[0]!.key).toBe(`telegram:${USER}`);
    expect(report.chats[0]!.day_tokens).toBeGreaterThan(1);
    const id = report.pauses[0]!.id;
    expect(report.pauses[0]).toMatchObject({ budget: "chat:day", key: `telegram:${USER}` });
    const text = await cli(["usage"]);
    expect(text.stdout).toContain("chat per day (1 tokens):");
    expect(text.stdout).toContain("USED UP");
    expect(text.stdout).toContain(id);

    const raised = await cli(["approvals", "approve", id, "--raise"]);
    expect(raised.code, raised.stderr).toBe(0);
    await reply("second");
    expect((await cli(["approvals", "deny", id])).code).toBe(1); // already answered

    telegram.sendUserMessage({ chatId: USER, text: "echo: third" });
    await waitFor(() => cards().length === 2, { timeoutMs: 20_000, message: "second pause" });
    const next = /approve:(b-[0-9a-f]{10})/.exec(
      cards()[1]!
        .sentButtons!.flat()
        .map((b) => b.callback_data)
        .join(" "),
    )![1]!;
    expect((await cli(["approvals", "deny", next])).code).toBe(0);
    await waitFor(() => texts().some((t) => t.startsWith("🚫 Stopped")), {
      timeoutMs: 20_000,
      message: `denied; chat: ${JSON.stringify(texts())}`,
    });
    expect(texts()).not.toContain("third");
    await gateway.stop();
  });
});
