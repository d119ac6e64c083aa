import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  ONLINE_NOTICE,
  RESTART_NOTICE_AUTO_RESUME,
  RESTARTED_NOTICE,
  STOP_NOTICE,
} from "../../src/runner/lifecycle-texts.js";
import { defaultScript, type FakeOpenAI, startFakeOpenAI } from "../fakes/openai-server.js";
import { type FakeTelegram, startFakeTelegram } from "../fakes/telegram-server.js";
import {
  bootedPids,
  freePort,
  type GatewayProcess,
  readGatewayState as gatewayState,
  isAlive,
  readGatewayPid,
  startGatewayProcess,
} from "../helpers/gateway-process.js";
import { createTempDir } from "../helpers/temp-home.js";
import { waitFor } from "../helpers/wait-for.js";

const TOKEN = "123456:E2E-token";
const USER = 4242;

describe("gateway lifecycle on Telegram (real processes)", () => {
  let home: ReturnType<typeof createTempDir>;
  let telegram: FakeTelegram;
  let model: FakeOpenAI;
  let port: number;
  const spawned: GatewayProcess[] = [];

  beforeEach(async () => {
    home = createTempDir("keel-tg-e2e-");
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

  const env = (extra: Record<string, string> = {}) => ({
    TELEGRAM_BOT_TOKEN: TOKEN,
    TELEGRAM_API_ROOT: telegram.apiRoot,
    TELEGRAM_ALLOWED_USERS: String(USER),
    // /restart and /sethome need operator rights.
    TELEGRAM_ADMIN_USERS: String(USER),
    OPENAI_BASE_URL: model.baseUrl,
    KEEL_MODEL: "fake-model",
    KEEL_HTTP_PORT: String(port),
    KEEL_LOG_LEVEL: "debug",
    ...extra,
  });

  async function start(extra: Record<string, string> = {}): Promise<GatewayProcess> {
    const gateway = await startGatewayProcess({
      home: home.path,
      env: env(extra),
      restartOnExit75: true,
      followSuccessor: true,
    });
    spawned.push(gateway);
    const boots = bootedPids(home.path).length;
    await waitFor(() => bootedPids(home.path).length > boots, {
      timeoutMs: 20_000,
      message: `gateway running\n${gateway.output().slice(-2000)}`,
    });
    return gateway;
  }

  const bot = (chatId: number) => telegram.chatLog(chatId).filter((entry) => entry.from === "bot");
  const botTexts = (chatId: number) => bot(chatId).map((entry) => entry.text);

  /** Waits for the successor of a restart to boot and answer; returns its pid. */
  async function waitForSuccessor(firstPid: number): Promise<number> {
    await waitFor(() => bootedPids(home.path).length >= 2, {
      timeoutMs: 30_000,
      message: "successor booted",
    });
    const successor = bootedPids(home.path)[1]!;
    expect(successor).not.toBe(firstPid);
    return successor;
  }

  /** Proves the gateway works after a restart, and that nothing earlier ran again. */
  async function roundTrip(chatId: number, text: string): Promise<number> {
    const sent = telegram.sendUserMessage({ chatId, userId: USER, text: `echo: ${text}` });
    await waitFor(() => botTexts(chatId).includes(text), {
      timeoutMs: 15_000,
      message: `reply "${text}"`,
    });
    return sent.message_id;
  }

  it("/restart during a turn: draining reply, anchored notice, restarted once, resumed", async () => {
    const first = await start();
    const slow = telegram.sendUserMessage({ chatId: USER, text: "slow: 3000 finished late" });
    await waitFor(() => model.requests.length >= 1, { message: "turn with the model" });
    const restart = telegram.sendUserMessage({ chatId: USER, text: "/restart" });

    await waitFor(() => botTexts(USER).includes(RESTARTED_NOTICE), {
      timeoutMs: 30_000,
      message: `restarted greeting; chat so far: ${JSON.stringify(botTexts(USER))}`,
    });
    const successor = await waitForSuccessor(first.pid);
    expect([0, 75]).toContain((await first.waitForExit(20_000)).code);

    const log = bot(USER);
    const draining = log.find((e) => e.text === "⏳ Draining 1 active agent(s) before restart...");
    expect(draining, JSON.stringify(botTexts(USER))).toBeDefined();
    expect(draining!.replyToMessageId).toBe(restart.message_id);
    const notice = log.find((e) => e.text === RESTART_NOTICE_AUTO_RESUME);
    expect(notice, JSON.stringify(botTexts(USER))).toBeDefined();
    expect(notice!.replyToMessageId).toBe(restart.message_id);
    const greeting = log.find((e) => e.text === RESTARTED_NOTICE)!;
    expect(greeting.replyToMessageId).toBe(restart.message_id);

    // The interrupted turn resumes by itself and answers in the chat.
    await waitFor(() => botTexts(USER).includes("finished late"), {
      timeoutMs: 20_000,
      message: "resumed reply",
    });
    // It answers the interrupted message, not the /restart that came after it.
    expect(bot(USER).find((e) => e.text === "finished late")!.replyToMessageId).toBe(
      slow.message_id,
    );
    await roundTrip(USER, "after the restart");
    // The /restart was confirmed before the restart: it did not run again.
    expect(telegram.confirmedOffset()).toBeGreaterThan(restart.update_id);
    expect(bootedPids(home.path)).toHaveLength(2);
    expect(readGatewayPid(home.path)?.pid).toBe(successor);
    expect(botTexts(USER).filter((t) => t === RESTARTED_NOTICE)).toHaveLength(1);
  });

  it("an idle /restart sends no interruption notice, only the restarted greeting", async () => {
    const first = await start();
    const restart = telegram.sendUserMessage({ chatId: USER, text: "/restart" });
    await waitFor(() => botTexts(USER).includes(RESTARTED_NOTICE), {
      timeoutMs: 30_000,
      message: "restarted greeting",
    });
    await waitForSuccessor(first.pid);
    const ping = await roundTrip(USER, "still here");
    expect(bot(USER).map((e) => [e.text, e.replyToMessageId])).toEqual([
      [RESTARTED_NOTICE, restart.message_id],
      ["still here", ping],
    ]);
    expect(bootedPids(home.path)).toHaveLength(2);
  });

  it("a /restart that Telegram delivers again after the restart does not restart twice", async () => {
    const first = await start();
    // Every confirmation of the /restart is lost: the in-loop poll and the confirm at stop fail.
    telegram.failNext("getUpdates", { error_code: 502 });
    telegram.failNext("getUpdates", { error_code: 502 });
    const restart = telegram.sendUserMessage({ chatId: USER, text: "/restart" });
    await first.waitForExit(20_000);
    expect(telegram.pendingUpdates().map((u) => u.update_id)).toContain(restart.update_id);

    await waitForSuccessor(first.pid);
    await waitFor(() => telegram.confirmedOffset() > restart.update_id, {
      timeoutMs: 15_000,
      message: "successor received the /restart again",
    });
    await roundTrip(USER, "no second restart");
    expect(bootedPids(home.path)).toHaveLength(2);
    expect(botTexts(USER).filter((t) => t === RESTARTED_NOTICE)).toHaveLength(1);
  });

  it("a restart from the control API greets the configured home channel", async () => {
    const homeChat = -100900;
    const first = await start({ TELEGRAM_HOME_CHANNEL: String(homeChat) });
    const token = readFileSync(join(home.path, "control_token"), "utf8").trim();
    const response = await fetch(`http://127.0.0.1:${port}/api/gateway/restart`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}` },
    });
    expect(response.status).toBe(202);
    await waitFor(() => botTexts(homeChat).includes(ONLINE_NOTICE), {
      timeoutMs: 30_000,
      message: "online notice in the home channel",
    });
    await waitForSuccessor(first.pid);
    expect(botTexts(homeChat)).toEqual([ONLINE_NOTICE]);
    expect(botTexts(USER)).toEqual([]);
  });

  it("/sethome makes a chat the home channel that gets the online greeting", async () => {
    const configured = -100900;
    const group = -100500;
    const first = await start({ TELEGRAM_HOME_CHANNEL: String(configured) });
    telegram.sendUserMessage({ chatId: group, userId: USER, text: "/sethome" });
    await waitFor(() => botTexts(group).some((t) => t.includes("home channel")), {
      message: "sethome confirmation",
    });
    const token = readFileSync(join(home.path, "control_token"), "utf8").trim();
    await fetch(`http://127.0.0.1:${port}/api/gateway/restart`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}` },
    });
    await waitFor(() => botTexts(group).includes(ONLINE_NOTICE), {
      timeoutMs: 30_000,
      message: "online notice in the /sethome chat",
    });
    await waitForSuccessor(first.pid);
    await roundTrip(USER, "ping");
    expect(botTexts(configured)).toEqual([]);
    expect(botTexts(group).filter((t) => t === ONLINE_NOTICE)).toHaveLength(1);
  });

  it("three SIGKILLs in a row with three chats mid-turn: held back, each chat told once, every message answered once when stable", async () => {
    // A shorter breaker window than the default 60 s keeps the test short; everything else is
    // as shipped. The three boots after the kills fall within it, so the third trips the breaker.
    const windowSeconds = 30;
    writeFileSync(
      join(home.path, "config.yaml"),
      `agent:\n  resume_breaker_window: ${windowSeconds}\n`,
    );
    const chats = [4242, 4343, 4444];
    const extra = { TELEGRAM_ALLOWED_USERS: chats.join(",") };
    // Every model call hangs until the kill (the chats stay mid-turn), until the loop is over.
    let hold = true;
    model.script((request) => (hold ? { hang: true } : defaultScript(request)));
    let gateway = await start(extra);
    const sent = chats.map((chatId) =>
      telegram.sendUserMessage({ chatId, userId: chatId, text: `echo: answer ${chatId}` }),
    );
    for (let kill = 1; kill <= 3; kill += 1) {
      // The turns (then their resumes) are with the model in all three chats: kill.
      await waitFor(() => model.requests.length >= 3 * kill, {
        timeoutMs: 20_000,
        message: `three model calls open before kill ${kill}`,
      });
      gateway.kill("SIGKILL");
      await gateway.waitForExit(10_000);
      gateway = await start(extra);
    }
    const isNotice = (text: string) => text.startsWith("⏸ The gateway restarted");
    await waitFor(() => chats.every((chatId) => botTexts(chatId).some(isNotice)), {
      timeoutMs: 20_000,
      message: `held-back notices: ${JSON.stringify(chats.map(botTexts))}`,
    });
    expect(model.requests).toHaveLength(9);
    hold = false;
    await waitFor(() => chats.every((chatId) => botTexts(chatId).includes(`answer ${chatId}`)), {
      timeoutMs: (windowSeconds + 30) * 1000,
      message: `answers after the window: ${JSON.stringify(chats.map(botTexts))}`,
    });
    chats.forEach((chatId, i) => {
      const log = bot(chatId);
      const notices = log.filter((e) => isNotice(e.text));
      expect(notices, JSON.stringify(botTexts(chatId))).toHaveLength(1);
      expect(notices[0]!.text).toContain(`“echo: answer ${chatId}”`);
      expect(notices[0]!.replyToMessageId).toBe(sent[i]!.message_id);
      const answers = log.filter((e) => e.text === `answer ${chatId}`);
      expect(answers, JSON.stringify(botTexts(chatId))).toHaveLength(1);
      expect(answers[0]!.replyToMessageId).toBe(sent[i]!.message_id);
    });
    expect(bootedPids(home.path)).toHaveLength(4);
  }, 120_000);

  it("SIGTERM during a turn: the chat is told of the shutdown and the turn resumes after the next start", async () => {
    const first = await start();
    const slow = telegram.sendUserMessage({ chatId: USER, text: "slow: 2000 resumed answer" });
    await waitFor(() => model.requests.length >= 1, { message: "turn with the model" });
    first.kill("SIGTERM");
    await first.waitForExit(20_000);
    // A bare SIGTERM is a stop nobody announced, not a restart: the stop notice.
    expect(botTexts(USER)).toEqual([STOP_NOTICE]);
    expect(gatewayState(home.path)?.gateway_state).toBe("running");
    expect(isAlive(first.pid)).toBe(false);

    await start();
    await waitFor(() => botTexts(USER).includes("resumed answer"), {
      timeoutMs: 20_000,
      message: "resumed reply",
    });
    expect(bot(USER).find((e) => e.text === "resumed answer")!.replyToMessageId).toBe(
      slow.message_id,
    );
    expect(model.requests.length).toBeGreaterThanOrEqual(2);
  });
});
