/**
 * MCP tools in the real gateway process: a stdio MCP server from the test tree, the stand-in
 * Telegram Bot API and model. The server's ledger counts how often each call really ran.
 */
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { UNKNOWN_OUTCOME } from "../../src/runner/texts.js";
import { STDIO_SERVER_ARGS, STDIO_SERVER_CWD } from "../fakes/mcp-test-server.js";
import {
  defaultScript,
  type FakeChatRequest,
  type FakeOpenAI,
  lastUserText,
  startFakeOpenAI,
} from "../fakes/openai-server.js";
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

const TOKEN = "123456:E2E-mcp";
const USER = 4242;

/** `mcp: TOOL {json}` calls TOOL; once its result is in, the reply is `done: <result>`. */
function mcpScript(request: FakeChatRequest) {
  const lastUser = request.messages.findLastIndex((m) => m.role === "user");
  const result = request.messages.slice(lastUser + 1).findLast((m) => m.role === "tool");
  const match = /^mcp: (\S+) (.*)$/.exec(lastUserText(request));
  if (!match) return defaultScript(request);
  if (result) return { text: `done: ${String(result.content)}` };
  return { toolCalls: [{ name: match[1]!, arguments: JSON.parse(match[2]!) }] };
}

// Each test starts real gateways and MCP servers through tsx: ~20 s alone, more on a busy machine.
describe("MCP tools (real process, stdio MCP server)", { timeout: 90_000 }, () => {
  let home: ReturnType<typeof createTempDir>;
  let telegram: FakeTelegram;
  let model: FakeOpenAI;
  let port: number;
  const spawned: GatewayProcess[] = [];

  beforeEach(async () => {
    home = createTempDir("keel-mcp-e2e-");
    telegram = await startFakeTelegram({ token: TOKEN });
    model = await startFakeOpenAI();
    model.script(mcpScript);
    port = await freePort();
  });

  afterEach(async () => {
    for (const gateway of spawned.splice(0)) await gateway.stop();
    await telegram.close();
    await model.close();
    home.cleanup();
  });

  const ledgerPath = () => join(home.path, "mcp-ledger.txt");
  const ledger = () =>
    existsSync(ledgerPath()) ? readFileSync(ledgerPath(), "utf8").split("\n").filter(Boolean) : [];

  function writeConfig(approval: string, extra: Record<string, unknown> = {}): void {
    const server = {
      command: process.execPath,
      args: STDIO_SERVER_ARGS,
      cwd: STDIO_SERVER_CWD,
      env: { MCP_LEDGER: ledgerPath() },
      approval,
    };
    writeFileSync(
      join(home.path, "config.yaml"),
      JSON.stringify({ mcp: { servers: { files: server, ...extra } } }),
    );
  }

  async function start(): Promise<GatewayProcess> {
    const gateway = await startGatewayProcess({
      home: home.path,
      env: {
        TELEGRAM_BOT_TOKEN: TOKEN,
        TELEGRAM_API_ROOT: telegram.apiRoot,
        TELEGRAM_ALLOWED_USERS: String(USER),
        OPENAI_BASE_URL: model.baseUrl,
        KEEL_MODEL: "fake-model",
        KEEL_HTTP_PORT: String(port),
      },
    });
    spawned.push(gateway);
    const boots = bootedPids(home.path).length;
    await waitFor(() => bootedPids(home.path).length > boots, {
      timeoutMs: 30_000,
      message: `gateway running\n${gateway.output().slice(-2000)}`,
    });
    return gateway;
  }

  const texts = () =>
    telegram
      .chatLog(USER)
      .filter((e) => e.from === "bot")
      .map((e) => e.text);
  const reply = (prefix: string) =>
    waitFor(() => texts().some((t) => t.startsWith(prefix)), {
      timeoutMs: 30_000,
      message: `reply "${prefix}"; chat: ${JSON.stringify(texts())}`,
    });

  it("tools appear as <server>__<tool>; a side-effecting one waits for approval, a read-only one does not", async () => {
    writeConfig("dangerous");
    const gateway = await start();
    const status = (await (await gateway.control("/api/status")).json()) as {
      mcp: Record<string, { state: string; tools: string[] }>;
    };
    expect(status.mcp.files).toMatchObject({ state: "connected" });
    expect(status.mcp.files!.tools).toContain("files__record");

    telegram.sendUserMessage({ chatId: USER, text: 'mcp: files__lookup {"key":"k"}' });
    await reply("done: value of k");

    telegram.sendUserMessage({ chatId: USER, text: 'mcp: files__record {"text":"a"}' });
    await waitFor(() => telegram.chatLog(USER).some((e) => e.buttons?.length), {
      timeoutMs: 30_000,
      message: `approval card; chat: ${JSON.stringify(texts())}`,
    });
    const card = telegram.chatLog(USER).find((e) => e.buttons?.length)!;
    expect(card.text).toContain("files__record");
    expect(ledger()).toEqual(["lookup k"]);
    const id = card.buttons![0]![0]!.callback_data!.slice("approve:".length);
    telegram.pressButton({
      chatId: USER,
      messageId: card.messageId,
      userId: USER,
      data: `approve:${id}`,
    });
    await reply("done: recorded a");
    expect(ledger()).toEqual(["lookup k", "record a"]);
  });

  it("after a SIGKILL mid-call: a side-effecting call is not run again (outcome unknown), a read-only one is", async () => {
    writeConfig("off");
    const first = await start();
    telegram.sendUserMessage({ chatId: USER, text: 'mcp: files__record {"text":"a","ms":60000}' });
    await waitFor(() => ledger().includes("record a"), {
      timeoutMs: 30_000,
      message: "record ran",
    });
    first.kill("SIGKILL");
    await first.waitForExit(10_000);
    const second = await start();
    await reply("done: ");
    expect(texts().find((t) => t.startsWith("done: "))).toContain(UNKNOWN_OUTCOME.slice(0, 40));
    expect(ledger()).toEqual(["record a"]);

    telegram.sendUserMessage({ chatId: USER, text: 'mcp: files__lookup {"key":"k","ms":60000}' });
    await waitFor(() => ledger().includes("lookup k"), {
      timeoutMs: 30_000,
      message: "lookup ran",
    });
    second.kill("SIGKILL");
    await second.waitForExit(10_000);
    await start();
    await reply("done: value of k");
    expect(ledger()).toEqual(["record a", "lookup k", "lookup k"]);
  });

  it("keel mcp list and keel doctor show each server's tools, and a broken server's error", async () => {
    writeConfig("dangerous");
    const listed = await runKeel({ home: home.path, args: ["mcp", "list"] });
    expect(listed.code, listed.stderr).toBe(0);
    expect(listed.stdout).toContain("files (stdio, approval: dangerous): connected");
    expect(listed.stdout).toMatch(/files__lookup \[read-only\]/);
    expect(listed.stdout).toMatch(/files__record {2}/);

    writeConfig("dangerous", {
      broken: { command: join(home.path, "missing-server"), approval: "off" },
    });
    const broken = await runKeel({ home: home.path, args: ["mcp", "list"] });
    expect(broken.code).toBe(1);
    expect(broken.stdout).toContain(
      "broken (stdio, approval: off): error: MCP server broken could not start",
    );
    const doctor = await runKeel({ home: home.path, args: ["doctor"] });
    expect(doctor.stdout).toMatch(/✓ mcp files: 3 tool\(s\)/);
    expect(doctor.stdout).toMatch(/✗ mcp broken: MCP server broken could not start/);

    // The gateway starts anyway; the broken server is reported, the other one's tools work.
    const gateway = await start();
    const status = (await (await gateway.control("/api/status")).json()) as {
      mcp: Record<string, { state: string; error: string | null }>;
    };
    expect(status.mcp.broken!.error).toMatch(/could not start/);
    telegram.sendUserMessage({ chatId: USER, text: "/status" });
    await waitFor(() => texts().some((t) => t.includes("MCP broken: error")), {
      timeoutMs: 20_000,
      message: `status; chat: ${JSON.stringify(texts())}`,
    });
    telegram.sendUserMessage({ chatId: USER, text: 'mcp: files__lookup {"key":"z"}' });
    await reply("done: value of z");
  });
});
