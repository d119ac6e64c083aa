/**
 * Real gateways in this process, as `keel gateway run` builds them (the composition root with the
 * SQLite store, runner, agent and HTTP server) but without signals and never spawning a detached
 * successor on restart:
 * - `createTestGateway(config)`: the bare Gateway, not started (any test or the bench);
 * - `startInProcessGateway({ home })`: started on port 0 with a `test` platform to chat through;
 * - `createTelegramGateway()`: wired to a fake Telegram Bot API server and a fake model, with
 *   start/stop on the same home.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import pino from "pino";
import { loadConfig } from "../../src/config/load-config.js";
import type { Config } from "../../src/config/schema.js";
import type { InboundMessage } from "../../src/contract/platform.js";
import { createGateway, type GatewayOptions } from "../../src/gateway/create-gateway.js";
import type { Gateway } from "../../src/gateway/gateway.js";
import type { Supervisor } from "../../src/lifecycle/exit-code.js";
import { type FakeOpenAI, startFakeOpenAI } from "../fakes/openai-server.js";
import { type FakeTelegram, startFakeTelegram } from "../fakes/telegram-server.js";
import { RecordingAdapter } from "./recording-adapter.js";
import { createTempDir } from "./temp-home.js";
import { waitFor } from "./wait-for.js";

/**
 * Options of {@link createTestGateway}: the composition root's seams. The supervisor defaults to
 * none; restart tests use "container" (exit 75), and no test gateway can spawn a successor.
 */
export type TestGatewayOptions = Omit<GatewayOptions, "logger" | "relaunch">;

/**
 * A real Gateway in this process (SQLite store, runner, agent, HTTP on the configured port —
 * use KEEL_HTTP_PORT=0), not started; logs are discarded.
 */
export function createTestGateway(config: Config, options: TestGatewayOptions = {}): Gateway {
  // No forced collections of the worker's heap shared with the other tests' gateways.
  return createGateway(config, {
    settleMemory: false,
    ...options,
    logger: pino({ level: "silent" }),
  });
}

/**
 * A real gateway in this process on `home` (port 0, no web chat), talking to the fake model at
 * `modelBaseUrl` and to the platform `env` configures; resolves once `platform` reports connected.
 */
export async function startPlatformGateway(options: {
  home: string;
  modelBaseUrl: string;
  platform: string;
  env: Record<string, string>;
}): Promise<Gateway> {
  const { config } = loadConfig({
    home: options.home,
    env: {
      ...options.env,
      OPENAI_BASE_URL: options.modelBaseUrl,
      KEEL_MODEL: "fake-model",
      KEEL_HTTP_PORT: "0",
      KEEL_WEBCHAT_ENABLED: "false",
    },
  });
  const gateway = createTestGateway(config);
  try {
    await gateway.start();
    await waitFor(
      async () => (await gateway.status()).platforms[options.platform]?.state === "connected",
      { timeoutMs: 15_000, message: `${options.platform} connected` },
    );
  } catch (err) {
    // Workers keep running between files: a gateway nobody holds would outlive this test.
    await stopTestGateway(gateway);
    throw err;
  }
  return gateway;
}

/** Planned stop; resolves with the exit code once everything is closed. */
export async function stopTestGateway(gateway: Gateway | undefined): Promise<number | undefined> {
  if (!gateway) return undefined;
  gateway.requestStop({ restart: false, signalInitiated: false });
  return gateway.exited;
}

/** A test platform that also counts how often the gateway disconnected it. */
export class CountingAdapter extends RecordingAdapter {
  stops = 0;
  override async stop(): Promise<void> {
    this.stops += 1;
    await super.stop();
  }
}

export interface InProcessGatewayOptions {
  home: string;
  /** Base URL of the fake model server (`startFakeOpenAI().baseUrl`); omit for no model. */
  modelBaseUrl?: string;
  /** Extra environment (KEEL_RESTART_DRAIN_TIMEOUT, KEEL_GATEWAY_BUSY_INPUT_MODE, ...). */
  env?: Record<string, string>;
  /** Default null. Restart tests use "container" (exit 75) so that no detached successor is spawned. */
  supervisor?: Supervisor;
  now?: () => number;
  schedule?: (fn: () => void, ms: number) => () => void;
  /** How the SQLite store flushes its WAL (a stand-in that fails, for a broken disk). */
  sqliteFsync?: GatewayOptions["sqliteFsync"];
}

export interface InProcessGateway {
  gateway: Gateway;
  /** The `test` platform: what each chat "saw". */
  platform: CountingAdapter;
  /** Base URL of the gateway's HTTP server. */
  url: string;
  controlToken: string;
  /**
   * Sends a chat message from the test platform; the session key is `agent:main:test:dm:<chatId>`.
   * The sender has operator rights (as the web chat's) unless `operator` is false.
   */
  send(
    text: string,
    chatId?: string,
    operator?: boolean,
  ): Promise<{ sessionId: string; inboxId: number }>;
  /** Stops it (planned stop) unless it already stopped; resolves with the exit code. */
  shutdown(): Promise<number>;
}

let messageCounter = 0;

/** Session key of a test-platform chat. */
export function testSessionKey(chatId = "1"): string {
  return `agent:main:test:dm:${chatId}`;
}

/**
 * A real Gateway in this process (the composition root, with the real store, runner, HTTP
 * server and agent) on port 0, with a `test` platform added, started and ready.
 */
export async function startInProcessGateway(
  options: InProcessGatewayOptions,
): Promise<InProcessGateway> {
  const env: Record<string, string> = {
    KEEL_HTTP_PORT: "0",
    KEEL_WEBCHAT_ENABLED: "false",
    ...(options.modelBaseUrl && {
      OPENAI_BASE_URL: options.modelBaseUrl,
      KEEL_MODEL: "fake-model",
      OPENAI_API_KEY: "test",
    }),
    ...options.env,
  };
  const { config } = loadConfig({ home: options.home, env });
  const platform = new CountingAdapter("test");
  const gateway = createTestGateway(config, {
    extraAdapters: [platform],
    ...(options.supervisor && { supervisor: options.supervisor }),
    ...(options.now && { now: options.now }),
    ...(options.schedule && { schedule: options.schedule }),
    ...(options.sqliteFsync && { sqliteFsync: options.sqliteFsync }),
  });
  await gateway.start();
  let exitCode: number | null = null;
  void gateway.exited.then((code) => (exitCode = code));
  return {
    gateway,
    platform,
    url: `http://127.0.0.1:${gateway.port}`,
    controlToken: config.controlToken,
    async send(text, chatId = "1", operator = true) {
      messageCounter += 1;
      const message: InboundMessage = {
        platform: "test",
        chatId,
        platformMessageId: `m${messageCounter}`,
        sessionKey: testSessionKey(chatId),
        text,
        // A direct chat: the sender is the chat (whose memory file the turn uses).
        senderId: chatId,
        address: { platform: "test", chatId },
        ...(operator && { operator: true }),
      };
      const result = await gateway.runner.receive(message);
      return { sessionId: result.sessionId, inboxId: result.inboxId };
    },
    async shutdown() {
      if (exitCode !== null) return exitCode;
      gateway.requestStop({ restart: false, signalInitiated: false });
      return gateway.exited;
    },
  };
}

export const TEST_BOT_TOKEN = "123456:TEST-token";
/** The Telegram user (and private chat) allowed by default in the Telegram harness. */
export const ALLOWED_USER = 4242;

/** A real gateway, in this process, wired to a fake Telegram Bot API server and a fake model. */
export interface TelegramGatewayHarness {
  home: string;
  telegram: FakeTelegram;
  model: FakeOpenAI;
  /** The running gateway (replaced by `start()` after a `stop()`), or null while stopped. */
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

/** Builds the Telegram harness in a fresh home; `baseEnv` overrides go to every start. */
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
      const gateway = createTestGateway(config);
      await gateway.start();
      harness.gateway = gateway;
      return gateway;
    },
    async stop() {
      const gateway = harness.gateway;
      harness.gateway = null;
      await stopTestGateway(gateway ?? undefined);
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
