/**
 * A gateway's start loads only what its configuration uses (issue 34: the start's CPU decided
 * whether process tests finished under load). The built gateway is started with a module hook
 * that logs every file it loads; each bundle chunk stands for the source modules its source map
 * names. Without a chat platform, no platform SDK, adapter or other lazily loaded package may be
 * among them; with Telegram configured, grammY and the Telegram adapter are (the check can fail).
 */
import { existsSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { type FakeOpenAI, startFakeOpenAI } from "../fakes/openai-server.js";
import { type FakeTelegram, startFakeTelegram } from "../fakes/telegram-server.js";
import { type GatewayProcess, REPO_ROOT, startGatewayProcess } from "../helpers/gateway-process.js";
import { createTempDir } from "../helpers/temp-home.js";

const REGISTER = join(REPO_ROOT, "test/fixtures/module-log/register.mjs");
const TOKEN = "123456:lean-start";

/** Loaded on use, never by a start whose configuration does not use them. */
const NOT_AT_START = [
  /^node_modules\/(grammy|@slack|@discordjs|discord-api-types|imapflow|nodemailer|mailparser)\//,
  /^node_modules\/(@modelcontextprotocol|playwright-core|pg|web-tree-sitter|tree-sitter-bash)\//,
  /^node_modules\/(openai|tar|fflate|unpdf|linkedom|turndown|@mozilla\/readability)\//,
  /^node_modules\/@opentelemetry\/(sdk-trace|exporter-trace-otlp-http)\//,
  /^node_modules\/zod\/v4\/locales\/(?!en\.js)/,
  /^src\/platforms\/(telegram|slack|discord|email)\/adapter\.ts$/,
  /^src\/cli\/(setup|doctor|data-commands|chat|gateway-control)\.ts$/,
];

let gateway: GatewayProcess | undefined;
let model: FakeOpenAI | undefined;
let telegram: FakeTelegram | undefined;
let dir: { path: string; cleanup(): void } | undefined;

afterEach(async () => {
  await gateway?.stop();
  await telegram?.close();
  await model?.close();
  dir?.cleanup();
  gateway = telegram = model = dir = undefined;
});

/** The modules (paths from the repository root) a started gateway has loaded. */
async function modulesOfStart(env: Record<string, string>): Promise<string[]> {
  dir = createTempDir("keel-lean-start-");
  model = await startFakeOpenAI();
  const log = join(dir.path, "modules.txt");
  gateway = await startGatewayProcess({
    env: {
      OPENAI_BASE_URL: model.baseUrl,
      KEEL_MODEL: "fake-model",
      ...env,
      NODE_OPTIONS: `--import=${REGISTER}`,
      KEEL_TEST_MODULE_LOG: log,
    },
  });
  expect(await gateway.waitForRunning(20_000)).toBe(true);
  // A turn's worth of settling: a lazy import started at all would have loaded by then.
  await sleep(1000);
  const files = readFileSync(log, "utf8")
    .split("\n")
    .filter((url) => url.startsWith("file:"))
    .map((url) => fileURLToPath(url));
  return [...new Set(files.flatMap(sourcesOf))].map((path) => relative(REPO_ROOT, path));
}

/** A bundle chunk stands for the modules its source map names; any other file for itself. */
function sourcesOf(file: string): string[] {
  const map = `${file}.map`;
  if (!file.startsWith(join(REPO_ROOT, "dist", "bundle")) || !existsSync(map)) return [file];
  const { sources } = JSON.parse(readFileSync(map, "utf8")) as { sources: string[] };
  return sources.filter((s) => !s.includes(":")).map((s) => resolve(dirname(file), s));
}

const unexpected = (modules: string[]) =>
  modules.filter((m) => NOT_AT_START.some((pattern) => pattern.test(m)));

describe("what a gateway's start loads", () => {
  it("without a chat platform: no platform SDK, adapter or package that loads on use", async () => {
    const modules = await modulesOfStart({});
    // The log works for both kinds of loading, and the maps for the bundle.
    expect(modules).toContain("bin/keel.js");
    expect(modules.some((m) => m.startsWith("node_modules/better-sqlite3/"))).toBe(true);
    expect(modules).toContain("src/gateway/gateway.ts");
    expect(unexpected(modules)).toEqual([]);
  });

  it("with Telegram: grammY and the Telegram adapter, and still nothing else", async () => {
    telegram = await startFakeTelegram({ token: TOKEN });
    const modules = await modulesOfStart({
      TELEGRAM_BOT_TOKEN: TOKEN,
      TELEGRAM_API_ROOT: telegram.apiRoot,
    });
    const telegramOwn = (m: string) =>
      m.startsWith("node_modules/grammy/") || m === "src/platforms/telegram/adapter.ts";
    expect(modules).toEqual(
      expect.arrayContaining([
        "node_modules/grammy/out/mod.js",
        "src/platforms/telegram/adapter.ts",
      ]),
    );
    expect(unexpected(modules).filter((m) => !telegramOwn(m))).toEqual([]);
  });
});
