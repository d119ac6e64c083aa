/**
 * The web tools through the built `keel` process: the stand-in model calls them, the results
 * reach the model, the transcript and the tool-call journal; private addresses are refused there
 * as in the unit tests; search keys stay out of everything the model or the store sees.
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { openSqliteDatabase } from "../../src/sessions/sqlite-database.js";
import {
  type FakeChatRequest,
  type FakeOpenAI,
  type FakeToolCall,
  startFakeOpenAI,
} from "../fakes/openai-server.js";
import { type FakeWeb, startFakeWeb } from "../fakes/web-server.js";
import { type GatewayProcess, startGatewayProcess } from "../helpers/gateway-process.js";

let fake: FakeOpenAI;
let web: FakeWeb;
let root: string;
let home: string;
let gateways: GatewayProcess[] = [];

beforeEach(async () => {
  fake = await startFakeOpenAI();
  web = await startFakeWeb();
  root = mkdtempSync(join(tmpdir(), "keel-e2e-web-"));
  home = join(root, "home");
});

afterEach(async () => {
  await Promise.all(gateways.map((g) => g.stop()));
  gateways = [];
  await fake.close();
  await web.close();
  rmSync(root, { recursive: true, force: true });
});

async function startGateway(configYaml: string): Promise<GatewayProcess> {
  mkdirSync(home, { recursive: true });
  writeFileSync(join(home, "config.yaml"), configYaml);
  const gateway = await startGatewayProcess({
    home,
    env: { OPENAI_BASE_URL: fake.baseUrl, KEEL_MODEL: "fake-model" },
  });
  gateways.push(gateway);
  await gateway.waitForReady();
  return gateway;
}

/** The model calls these tools once, then answers "done". */
function scriptToolCalls(calls: FakeToolCall[]): void {
  fake.script((request) =>
    request.messages.at(-1)?.role === "tool" ? { text: "done" } : { toolCalls: calls },
  );
}

function toolResults(requests: FakeChatRequest[]): string[] {
  return (requests.at(-1)?.messages ?? [])
    .filter((m) => m.role === "tool")
    .map((m) => (typeof m.content === "string" ? m.content : JSON.stringify(m.content)));
}

function offeredTools(requests: FakeChatRequest[]): string[] {
  const tools = (requests[0] as { tools?: { function: { name: string } }[] }).tools ?? [];
  return tools.map((t) => t.function.name);
}

async function chat(gateway: GatewayProcess, text: string): Promise<string> {
  const token = readFileSync(join(home, "control_token"), "utf8").trim();
  const res = await gateway.fetch("/v1/chat/completions", {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
    body: JSON.stringify({ model: "fake-model", messages: [{ role: "user", content: text }] }),
  });
  expect(res.status).toBe(200);
  return res.headers.get("x-session-id") ?? "";
}

function journal(): { name: string; arguments: string; state: string; result: string }[] {
  const db = openSqliteDatabase(join(home, "state.db"), { readonly: true, fileMustExist: true });
  try {
    return db
      .prepare("SELECT name, arguments, state, result FROM tool_calls ORDER BY id")
      .all() as never;
  } finally {
    db.close();
  }
}

describe("web_fetch through the gateway", () => {
  it("reads an allowed page into the transcript and the journal, and refuses private addresses", async () => {
    const gateway = await startGateway("tools:\n  web:\n    allow_hosts: ['127.0.0.1']\n");
    scriptToolCalls([
      { name: "web_fetch", arguments: { url: `${web.origin}/article` } },
      { name: "web_fetch", arguments: { url: "http://169.254.169.254/latest/meta-data/" } },
      { name: "web_fetch", arguments: { url: `http://[::1]:${web.port}/article` } },
    ]);
    const sessionId = await chat(gateway, "what do the otters do?");
    expect(offeredTools(fake.requests)).toContain("web_fetch");
    const [article = "", metadata = "", loopback = ""] = toolResults(fake.requests);
    expect(article).toContain("Title: Otters of the Rhine");
    expect(article).toContain("## Habits");
    expect(metadata).toContain("Refused: 169.254.169.254 is a link-local (cloud metadata) address");
    expect(loopback).toContain("Refused: ::1 is a loopback address");
    expect(web.requests.filter((r) => r === "GET /article")).toHaveLength(1);

    const transcript = await (await gateway.control(`/api/sessions/${sessionId}`)).text();
    expect(transcript).toContain("Otters hunt at dusk");
    expect(transcript).toContain("169.254.169.254 is a link-local");
    const rows = journal();
    expect(rows.map((r) => [r.name, r.state])).toEqual([
      ["web_fetch", "finished"],
      ["web_fetch", "finished"],
      ["web_fetch", "finished"],
    ]);
    expect(rows[0]!.result).toContain("Otters hunt at dusk");
    expect(JSON.parse(rows[1]!.arguments)).toEqual({
      url: "http://169.254.169.254/latest/meta-data/",
    });
  }, 60_000);
});

describe("web_search through the gateway", () => {
  it("is not offered without a provider (nor the browser without tools.web.browser)", async () => {
    const gateway = await startGateway("agent:\n  max_iterations: 3\n");
    fake.script(() => ({ text: "hello" }));
    await chat(gateway, "hi");
    expect(offeredTools(fake.requests)).toContain("web_fetch");
    expect(offeredTools(fake.requests)).not.toContain("web_search");
    expect(offeredTools(fake.requests)).not.toContain("browser");
  }, 60_000);

  it("searches with the configured key, which reaches neither the model nor the store nor the logs", async () => {
    const key = "brave-secret-key";
    const gateway = await startGateway(
      `tools:\n  web:\n    search:\n      provider: brave\n      url: ${web.origin}/brave\n      api_key: ${key}\n`,
    );
    scriptToolCalls([{ name: "web_search", arguments: { query: "otter" } }]);
    const sessionId = await chat(gateway, "search otters");
    expect(offeredTools(fake.requests)).toContain("web_search");
    const [results = ""] = toolResults(fake.requests);
    expect(results).toContain("1. Brave otter\n   https://example.org/brave");
    expect(web.searchHeaders.at(-1)?.["x-subscription-token"]).toBe(key);
    const rows = journal();
    expect(rows.map((r) => [r.name, r.arguments, r.state])).toEqual([
      ["web_search", JSON.stringify({ query: "otter" }), "finished"],
    ]);
    const transcript = await (await gateway.control(`/api/sessions/${sessionId}`)).text();
    expect(transcript).toContain("Brave otter");
    await gateway.stop();
    const seen = [
      JSON.stringify(fake.requests),
      transcript,
      ...["state.db", "state.db-wal", "logs/gateway.log"].map((name) => {
        try {
          return readFileSync(join(home, name)).toString("latin1");
        } catch {
          return "";
        }
      }),
    ].join("\n");
    expect(seen).toContain("Brave otter");
    expect(seen).not.toContain(key);
  }, 60_000);
});

describe.skipIf(!existsSync("/usr/bin/chromium"))("browser through the gateway", () => {
  it("is offered with tools.web.browser, opens a page and sends its screenshot to the chat", async () => {
    const gateway = await startGateway(
      "tools:\n  web:\n    browser: true\n    allow_hosts: ['127.0.0.1']\n",
    );
    scriptToolCalls([
      { name: "browser", arguments: { action: "open", url: `${web.origin}/article` } },
      { name: "browser", arguments: { action: "screenshot" } },
      { name: "browser", arguments: { action: "close" } },
    ]);
    const token = readFileSync(join(home, "control_token"), "utf8").trim();
    const res = await gateway.fetch("/v1/chat/completions", {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
      body: JSON.stringify({ model: "fake-model", messages: [{ role: "user", content: "look" }] }),
    });
    expect(res.status).toBe(200);
    expect(offeredTools(fake.requests)).toContain("browser");
    const [opened = "", shot = "", closed = ""] = toolResults(fake.requests);
    expect(opened).toContain("Title: Otters of the Rhine");
    expect(shot).toMatch(/queued it for the chat; link: \/files\/[0-9a-f-]{36}/);
    expect(closed).toBe("The browser page is closed.");
    const link = /\/files\/[0-9a-f-]{36}/.exec(shot)![0];
    const file = await gateway.fetch(link, { headers: { authorization: `Bearer ${token}` } });
    expect(file.status).toBe(200);
    expect(
      Buffer.from(await file.arrayBuffer())
        .subarray(1, 4)
        .toString("latin1"),
    ).toBe("PNG");
    expect(journal().map((r) => r.name)).toEqual(["browser", "browser", "browser"]);
  }, 90_000);
});
