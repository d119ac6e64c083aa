/**
 * Everything a crash test needs around the real gateway process: a temporary home, the chat
 * platform's stand-in with its users (chats.ts; Telegram unless told), the fake model with the chaos script, the side-effect ledger, and
 * read access to the store: `state.db` while the gateway is down, or (`store: "postgres"`) a
 * schema of the rig's own on the tests' Postgres (KEEL_TEST_PG_URL), read at any time.
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type Database from "better-sqlite3";
import type { BUSY_INPUT_MODES } from "../../src/config/schema.js";
import { openSqliteDatabase } from "../../src/sessions/sqlite-database.js";
import { type FakeOpenAI, startFakeOpenAI } from "../fakes/openai-server.js";
import type { FakeTelegram } from "../fakes/telegram-server.js";
import { type GatewayProcess, startGatewayProcess } from "../helpers/gateway-process.js";
import { adminQuery, createTestSchema, TEST_PG_URL } from "../helpers/store-harness.js";
import {
  type ChaosModel,
  createChaosModel,
  READ_FILE_NAME,
  READ_FILE_TEXT,
} from "./chaos-model.js";
import { type ChaosChats, type ChaosPlatform, startChats, type TelegramChats } from "./chats.js";

/**
 * The chaos model's window, in tokens: small, so that conversations are compacted within a few
 * turns. It must leave room beside what every call carries (the system prompt and the tool specs,
 * ~1.5k tokens with this round's tools and arguments): at 2048 the newest message alone no
 * longer fitted and turns failed as too large for the window.
 */
export const CHAOS_CONTEXT_LENGTH = 3072;

export type BusyMode = (typeof BUSY_INPUT_MODES)[number];

export interface RigOptions {
  /** Private chats, numbered (on Telegram the chat ids, also the allowed user ids). */
  chats: number[];
  /** Where the users write (default Telegram). */
  platform?: ChaosPlatform;
  seed: number;
  /** Folder to work in (default: a fresh temporary folder, removed by close()). */
  dir?: string;
  maxSlowMs?: number;
  /**
   * `agent.resume_breaker_window` in seconds, written to config.yaml only when given: the short
   * run in the test suite shortens it; `npm run chaos` leaves the shipped default (60 s).
   */
  breakerWindowSeconds?: number;
  /** Where the gateway keeps its store: `state.db` in the home (default) or Postgres. */
  store?: ChaosStore;
}

export type ChaosStore = "sqlite" | "postgres";

/** The shipped `agent.resume_breaker_window` (src/config/schema.ts). */
export const DEFAULT_BREAKER_WINDOW_SECONDS = 60;

export interface Rig {
  readonly dir: string;
  readonly home: string;
  readonly ledger: string;
  /** The users: what they write, what they see. */
  readonly chats: ChaosChats;
  /** The Telegram stand-in (a Telegram rig only; throws on another platform's). */
  readonly telegram: FakeTelegram;
  readonly model: FakeOpenAI;
  readonly chaos: ChaosModel;
  /** The restart-loop breaker window the gateways run with, ms. */
  readonly breakerWindowMs: number;
  /** Starts a gateway process (not waiting for it); `busyMode` is written to config.yaml first. */
  /** `http`: listen on a free loopback port (default: no port of its own, "0"). */
  spawn(options?: {
    crashPoint?: string;
    busyMode?: BusyMode;
    http?: boolean;
  }): Promise<GatewayProcess>;
  /** Spawns and waits until it runs; throws if it does not within `timeoutMs`. */
  start(options?: {
    crashPoint?: string;
    busyMode?: BusyMode;
    timeoutMs?: number;
  }): Promise<GatewayProcess>;
  readonly store: ChaosStore;
  /** Reads `state.db` (only while no gateway runs; SQLite only). */
  readDb<T>(read: (db: Database.Database) => T): T;
  /**
   * Rows of one query on whichever store the gateway uses (SQL both engines read alike; numbers
   * may come back as strings from Postgres, booleans as 0/1 from SQLite).
   */
  query(sql: string): Promise<Record<string, unknown>[]>;
  /** Tool-call ids in the ledger, one per line, in order. */
  ledgerLines(): string[];
  /** Session key of a numbered chat. */
  sessionKey(chatId: number): string;
  /** `keepStore`: a Postgres schema is left in place (named on stderr) for a post-mortem. */
  close(options?: { keepDir?: boolean; keepStore?: boolean }): Promise<void>;
}

export async function createRig(options: RigOptions): Promise<Rig> {
  const dir = options.dir ?? mkdtempSync(join(tmpdir(), "keel-chaos-"));
  mkdirSync(dir, { recursive: true });
  const home = join(dir, "home");
  // In the workspace: the commands run in the sandbox (the default), where only it is writable.
  const ledger = join(home, "workspace", "ledger.txt");
  mkdirSync(join(home, "workspace"), { recursive: true });
  writeFileSync(join(home, "workspace", READ_FILE_NAME), `${READ_FILE_TEXT}\n`);
  writeFileSync(ledger, "");
  const store = options.store ?? "sqlite";
  const schema = store === "postgres" ? await createTestSchema() : null;
  const chats = await startChats(options.platform ?? "telegram", options.chats);
  // A small model (2k tokens, reported by its /v1/models): long chats get compacted, so kills
  // land during compactions too (crash points mid_compaction, after_compaction).
  const model = await startFakeOpenAI({ contextLength: CHAOS_CONTEXT_LENGTH });
  const chaos = createChaosModel({ ledger, seed: options.seed, maxSlowMs: options.maxSlowMs });
  model.script(chaos.script);
  const env = {
    OPENAI_BASE_URL: model.baseUrl,
    KEEL_MODEL: "fake-model",
    KEEL_HTTP_PORT: "0",
    KEEL_API_ENABLED: "false",
    KEEL_WEBCHAT_ENABLED: "false",
    KEEL_LOG_LEVEL: "info",
    // A platform whose stand-in calls the gateway (a webhook) names the port it listens on.
    ...chats.env,
    ...(schema && {
      KEEL_DATABASE_URL: `${TEST_PG_URL}?options=${encodeURIComponent(`-c search_path=${schema.schema}`)}`,
    }),
  };
  const window = options.breakerWindowSeconds;
  const writeConfig = (busyMode: BusyMode) => {
    // Only what a user sets: the busy mode (and the breaker window when asked); the rest is
    // the shipped defaults, restart-loop breaker included.
    const agent = window === undefined ? "" : `agent:\n  resume_breaker_window: ${window}\n`;
    writeFileSync(join(home, "config.yaml"), `${agent}display:\n  busy_input_mode: ${busyMode}\n`);
  };
  const spawn = (
    spawnOptions: { crashPoint?: string; busyMode?: BusyMode; http?: boolean } = {},
  ) => {
    writeConfig(spawnOptions.busyMode ?? "interrupt");
    // Nothing inherited but PATH: the harness's gateways see exactly this environment.
    // Without KEEL_HTTP_PORT the helper picks a free port (and knows it); a platform's own
    // port is kept.
    const { KEEL_HTTP_PORT: _noPort, ...withHttp } = env;
    const listening = env.KEEL_HTTP_PORT !== "0";
    return startGatewayProcess({
      home,
      env: spawnOptions.http && !listening ? withHttp : env,
      inheritEnv: false,
      ...(spawnOptions.crashPoint && { crashPoint: spawnOptions.crashPoint }),
      outputFile: join(dir, "gateway.out.log"),
    });
  };
  return {
    dir,
    home,
    ledger,
    chats,
    get telegram(): FakeTelegram {
      if (chats.platform !== "telegram") throw new Error(`a ${chats.platform} rig has no Telegram`);
      return (chats as TelegramChats).telegram;
    },
    model,
    chaos,
    breakerWindowMs: (window ?? DEFAULT_BREAKER_WINDOW_SECONDS) * 1000,
    store,
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
      const db = openSqliteDatabase(join(home, "state.db"), { fileMustExist: true });
      try {
        return read(db);
      } finally {
        db.close();
      }
    },
    async query(sql) {
      if (schema) return adminQuery(`SET search_path TO ${schema.schema}; ${sql}`);
      const db = openSqliteDatabase(join(home, "state.db"), { fileMustExist: true });
      try {
        return db.prepare(sql).all() as Record<string, unknown>[];
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
    sessionKey: (chatId) => chats.sessionKey(chatId),
    async close(closeOptions = {}) {
      await chats.close();
      await model.close();
      if (schema && closeOptions.keepStore)
        console.error(`chaos: database kept in schema ${schema.schema}`);
      else await schema?.drop();
      if (!closeOptions.keepDir) rmSync(dir, { recursive: true, force: true });
    },
  };
}
