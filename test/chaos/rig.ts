/**
 * Everything a crash test needs around the real gateway process: a temporary home, the fake
 * Telegram Bot API server, the fake model with the chaos script, the side-effect ledger, and
 * read access to `state.db` while the gateway is down.
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import type { BUSY_INPUT_MODES } from "../../src/config/schema.js";
import { type FakeOpenAI, startFakeOpenAI } from "../fakes/openai-server.js";
import { type FakeTelegram, startFakeTelegram } from "../fakes/telegram-server.js";
import { type GatewayProcess, startGatewayProcess } from "../helpers/gateway-process.js";
import {
  type ChaosModel,
  createChaosModel,
  READ_FILE_NAME,
  READ_FILE_TEXT,
} from "./chaos-model.js";

export type BusyMode = (typeof BUSY_INPUT_MODES)[number];

const TOKEN = "123456:chaos-token";

export interface RigOptions {
  /** Telegram private chat ids (also the allowed user ids). */
  chats: number[];
  seed: number;
  /** Folder to work in (default: a fresh temporary folder, removed by close()). */
  dir?: string;
  maxSlowMs?: number;
}

export interface Rig {
  readonly dir: string;
  readonly home: string;
  readonly ledger: string;
  readonly telegram: FakeTelegram;
  readonly model: FakeOpenAI;
  readonly chaos: ChaosModel;
  /** Starts a gateway process (not waiting for it); `busyMode` is written to config.yaml first. */
  spawn(options?: { crashPoint?: string; busyMode?: BusyMode }): Promise<GatewayProcess>;
  /** Spawns and waits until it runs; throws if it does not within `timeoutMs`. */
  start(options?: {
    crashPoint?: string;
    busyMode?: BusyMode;
    timeoutMs?: number;
  }): Promise<GatewayProcess>;
  /** Reads `state.db` (only while no gateway runs). */
  readDb<T>(read: (db: Database.Database) => T): T;
  /** Tool-call ids in the ledger, one per line, in order. */
  ledgerLines(): string[];
  /** Session key of a private chat. */
  sessionKey(chatId: number): string;
  close(options?: { keepDir?: boolean }): Promise<void>;
}

export async function createRig(options: RigOptions): Promise<Rig> {
  const dir = options.dir ?? mkdtempSync(join(tmpdir(), "keel-chaos-"));
  mkdirSync(dir, { recursive: true });
  const home = join(dir, "home");
  const ledger = join(dir, "ledger.txt");
  mkdirSync(join(home, "workspace"), { recursive: true });
  writeFileSync(join(home, "workspace", READ_FILE_NAME), `${READ_FILE_TEXT}\n`);
  writeFileSync(ledger, "");
  const telegram = await startFakeTelegram({ token: TOKEN });
  const model = await startFakeOpenAI();
  const chaos = createChaosModel({ ledger, seed: options.seed, maxSlowMs: options.maxSlowMs });
  model.script(chaos.script);
  const env = {
    OPENAI_BASE_URL: model.baseUrl,
    KEEL_MODEL: "fake-model",
    TELEGRAM_BOT_TOKEN: TOKEN,
    TELEGRAM_API_ROOT: telegram.apiRoot,
    TELEGRAM_ALLOWED_USERS: options.chats.join(","),
    KEEL_HTTP_PORT: "0",
    KEEL_API_ENABLED: "false",
    KEEL_WEBCHAT_ENABLED: "false",
    KEEL_LOG_LEVEL: "info",
  };
  const writeConfig = (busyMode: BusyMode) => {
    // The harness restarts far faster than any real restart loop: keep the breaker out of it.
    writeFileSync(
      join(home, "config.yaml"),
      `agent:\n  resume_breaker_window: 0\ndisplay:\n  busy_input_mode: ${busyMode}\n`,
    );
  };
  const spawn = (spawnOptions: { crashPoint?: string; busyMode?: BusyMode } = {}) => {
    writeConfig(spawnOptions.busyMode ?? "interrupt");
    // Nothing inherited but PATH: the harness's gateways see exactly this environment.
    return startGatewayProcess({
      home,
      env,
      inheritEnv: false,
      ...(spawnOptions.crashPoint && { crashPoint: spawnOptions.crashPoint }),
      outputFile: join(dir, "gateway.out.log"),
    });
  };
  return {
    dir,
    home,
    ledger,
    telegram,
    model,
    chaos,
    spawn,
    async start(startOptions = {}) {
      const gateway = await spawn(startOptions);
      if (!(await gateway.waitForRunning(startOptions.timeoutMs ?? 20_000))) {
        await gateway.stop();
        throw new Error(`gateway did not start (see ${join(dir, "gateway.out.log")})`);
      }
      return gateway;
    },
    readDb(read) {
      const db = new Database(join(home, "state.db"), { fileMustExist: true });
      try {
        return read(db);
      } finally {
        db.close();
      }
    },
    ledgerLines: () =>
      existsSync(ledger)
        ? readFileSync(ledger, "utf8")
            .split("\n")
            .filter((l) => l.trim() !== "")
        : [],
    sessionKey: (chatId) => `agent:main:telegram:dm:${chatId}`,
    async close(closeOptions = {}) {
      await telegram.close();
      await model.close();
      if (!closeOptions.keepDir) rmSync(dir, { recursive: true, force: true });
    },
  };
}
