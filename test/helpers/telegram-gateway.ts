import { readFileSync } from "node:fs";
import { join } from "node:path";
import pino from "pino";
import { loadConfig } from "../../src/config/load-config.js";
import { createAgentParts } from "../../src/gateway/agent-wiring.js";
import { Gateway } from "../../src/gateway/gateway.js";
import { type FakeOpenAI, startFakeOpenAI } from "../fakes/openai-server.js";
import { type FakeTelegram, startFakeTelegram } from "../fakes/telegram-server.js";
import { createTempDir } from "./temp-home.js";

export const TEST_BOT_TOKEN = "123456:TEST-token";
/** The Telegram user (and private chat) allowed by default in these tests. */
export const ALLOWED_USER = 4242;

/** A real gateway, in this process, wired to a fake Telegram Bot API server and a fake model. */
export interface TelegramGatewayHarness {
  home: string;
  telegram: FakeTelegram;
  model: FakeOpenAI;
  /** The running gateway (replaced by `restart()`), or null while stopped. */
  gateway: Gateway | null;
  /** Starts a gateway on the home folder (the previous one must be stopped). */
  start(env?: Record<string, string>): Promise<Gateway>;
  /** Stops the running gateway as an operator would (planned stop) and waits for it. */
  stop(): Promise<void>;
  /** `gateway_state.json` as written by the gateway. */
  runtimeStatus(): Record<string, unknown>;
  /** Stops everything and removes the home folder. */
  close(): Promise<void>;
}

/**
 * Builds the harness. Env overrides go to every start; the relaunch hook throws because an
 * in-process gateway has no successor process.
 */
export async function createTelegramGateway(
  baseEnv: Record<string, string> = {},
): Promise<TelegramGatewayHarness> {
  const dir = createTempDir("keel-tg-");
  const telegram = await startFakeTelegram({ token: TEST_BOT_TOKEN });
  const model = await startFakeOpenAI();
  const harness: TelegramGatewayHarness = {
    home: dir.path,
    telegram,
    model,
    gateway: null,
    async start(env = {}) {
      const { config } = loadConfig({
        home: dir.path,
        env: {
          TELEGRAM_BOT_TOKEN: TEST_BOT_TOKEN,
          TELEGRAM_API_ROOT: telegram.apiRoot,
          TELEGRAM_ALLOWED_USERS: String(ALLOWED_USER),
          OPENAI_BASE_URL: model.baseUrl,
          KEEL_MODEL: "fake-model",
          KEEL_HTTP_PORT: "0",
          ...baseEnv,
          ...env,
        },
      });
      const logger = pino({ level: "silent" });
      const gateway = new Gateway({
        config,
        logger,
        agent: createAgentParts(config, logger),
        crashPoint: () => {},
        version: "test",
        supervisor: null,
        relaunch: () => {
          throw new Error("an in-process gateway has no successor process");
        },
      });
      await gateway.start();
      harness.gateway = gateway;
      return gateway;
    },
    async stop() {
      const gateway = harness.gateway;
      if (!gateway) return;
      harness.gateway = null;
      gateway.requestStop({ restart: false, signalInitiated: false });
      await gateway.exited;
    },
    runtimeStatus() {
      return JSON.parse(readFileSync(join(dir.path, "gateway_state.json"), "utf8")) as Record<
        string,
        unknown
      >;
    },
    async close() {
      await harness.stop().catch(() => {});
      await telegram.close();
      await model.close();
      dir.cleanup();
    },
  };
  return harness;
}

/** The bot messages a user sees in a chat (optionally one topic), oldest first. */
export function botMessages(telegram: FakeTelegram, chatId: number, threadId?: number) {
  return telegram.chatLog(chatId, threadId).filter((entry) => entry.from === "bot");
}
