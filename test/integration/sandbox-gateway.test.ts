/**
 * The sandbox through a real gateway in this process (the /v1 API, the approvals API, the stand-in
 * model): stepping outside it always waits for a human, whatever `tools.approval` says, and the
 * card says so; `auto` falls back to no sandbox, with a warning at start, where bubblewrap is
 * missing. (The sandbox's walls themselves: src/agent/tools/terminal-sandbox.test.ts and
 * test/e2e/tool-security.e2e.test.ts.)
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config/load-config.js";
import { createGateway } from "../../src/gateway/create-gateway.js";
import type { Gateway } from "../../src/gateway/gateway.js";
import {
  type FakeChatRequest,
  type FakeOpenAI,
  type FakeToolCall,
  startFakeOpenAI,
} from "../fakes/openai-server.js";
import { stopTestGateway } from "../helpers/in-process-gateway.js";
import { createMemoryLogger } from "../helpers/memory-logger.js";
import { waitFor } from "../helpers/wait-for.js";

let fake: FakeOpenAI;
let root: string;
let home: string;
let outside: string;
let gateway: Gateway | undefined;
let logLines: Record<string, unknown>[];

beforeEach(async () => {
  fake = await startFakeOpenAI();
  // Not under /tmp, which the sandbox replaces: the folder outside must be there, read-only.
  root = mkdtempSync(join(existsSync("/var/tmp") ? "/var/tmp" : "/tmp", "keel-sandbox-gw-"));
  home = join(root, "home");
  outside = join(root, "outside");
  mkdirSync(home);
  mkdirSync(outside);
});

afterEach(async () => {
  await stopTestGateway(gateway);
  gateway = undefined;
  await fake.close();
  rmSync(root, { recursive: true, force: true });
});

async function start(configYaml: string, env: Record<string, string> = {}) {
  writeFileSync(join(home, "config.yaml"), configYaml);
  const { config } = loadConfig({
    home,
    env: {
      PATH: process.env.PATH ?? "/usr/bin:/bin",
      KEEL_HTTP_PORT: "0",
      OPENAI_BASE_URL: fake.baseUrl,
      KEEL_MODEL: "m",
      ...env,
    },
  });
  const memory = createMemoryLogger();
  logLines = memory.lines;
  gateway = createGateway(config, { logger: memory.logger, settleMemory: false });
  await gateway.start();
  const base = `http://127.0.0.1:${gateway.port}`;
  const auth = { authorization: `Bearer ${config.controlToken}` };
  return {
    async chat(text: string): Promise<string> {
      const res = await fetch(`${base}/v1/chat/completions`, {
        method: "POST",
        headers: { ...auth, "content-type": "application/json" },
        body: JSON.stringify({ model: "m", messages: [{ role: "user", content: text }] }),
      });
      expect(res.status).toBe(200);
      const body = (await res.json()) as { choices: { message: { content: string } }[] };
      return body.choices[0]?.message.content ?? "";
    },
    /**
     * Sends `text` and waits for the approval its turn asks for: a /v1 request whose turn waits
     * for a human stays open until the answer, so its reply is the turn that follows.
     */
    async ask(text: string) {
      const reply = this.chat(text);
      reply.catch(() => {});
      const [pending] = await waitFor(
        async () => {
          const list = await this.pending();
          return list.length > 0 ? list : null;
        },
        { timeoutMs: 15_000, message: "an approval asked" },
      );
      return { pending: pending!, reply };
    },
    async pending(): Promise<{ id: string; reason: string; summary: string; rule: string }[]> {
      const res = await fetch(`${base}/api/approvals`, { headers: auth });
      return ((await res.json()) as { approvals: never[] }).approvals;
    },
    async approve(id: string): Promise<void> {
      const res = await fetch(`${base}/api/approvals/${id}`, {
        method: "POST",
        headers: { ...auth, "content-type": "application/json" },
        body: JSON.stringify({ decision: "approve" }),
      });
      expect(res.status).toBe(200);
    },
    async status(): Promise<{ sandbox?: { mode: string; detail: string } }> {
      return (await fetch(`${base}/api/status`, { headers: auth })).json() as never;
    },
  };
}

/** The model calls these tools once, then answers "done". */
function scriptToolCalls(calls: FakeToolCall[]): void {
  fake.script((request) =>
    request.messages.at(-1)?.role === "tool" ? { text: "done" } : { toolCalls: calls },
  );
}

/** The tool results in the last request the model got. */
function toolResults(requests: FakeChatRequest[]): string[] {
  return (requests.at(-1)?.messages ?? [])
    .filter((m) => m.role === "tool")
    .map((m) => (typeof m.content === "string" ? m.content : JSON.stringify(m.content)));
}

/** The `terminal` tool as the model was offered it. */
function offeredTerminal(): { description: string; parameters: { properties: object } } {
  const tools = (fake.requests.at(-1)?.tools ?? []) as unknown as {
    function: { name: string; description: string; parameters: { properties: object } };
  }[];
  const terminal = tools.find((t) => t.function.name === "terminal");
  if (!terminal) throw new Error("no terminal tool offered");
  return terminal.function;
}

describe("stepping outside the sandbox always asks", () => {
  it('`"sandbox": false` waits for a human even with tools.approval: off; the card says "outside the sandbox"; approved, it runs', async () => {
    const gw = await start("tools:\n  approval: off\n");
    const target = join(outside, "made-outside.txt");
    const command = `echo out > '${target}' && echo ran-outside`;
    scriptToolCalls([{ name: "terminal", arguments: { command, sandbox: false } }]);
    const { pending, reply } = await gw.ask("write outside");
    expect(pending.reason).toBe("it runs outside the sandbox");
    expect(pending.summary).toContain(command);
    expect(existsSync(target)).toBe(false);

    await gw.approve(pending.id);
    expect(await reply).toBe("done");
    expect(readFileSync(target, "utf8")).toBe("out\n");
    await waitFor(() => toolResults(fake.requests).some((r) => r.includes("ran-outside")), {
      timeoutMs: 15_000,
      message: "the model got the result",
    });
  });

  it("the same command inside the sandbox runs without asking and cannot write there", async () => {
    const gw = await start("tools:\n  approval: off\n");
    const target = join(outside, "made-outside.txt");
    scriptToolCalls([{ name: "terminal", arguments: { command: `echo out > '${target}'` } }]);
    expect(await gw.chat("write outside")).toBe("done");
    expect(await gw.pending()).toEqual([]);
    expect(existsSync(target)).toBe(false);
    const [result = ""] = toolResults(fake.requests);
    expect(result).toContain("Read-only file system");
    expect(result).toContain('"sandbox": false');
    expect(offeredTerminal().parameters.properties).toHaveProperty("sandbox");
  });

  it("write_file and send_file outside the writable roots ask; inside the workspace they do not", async () => {
    const gw = await start("tools:\n  approval: off\n");
    const target = join(outside, "written.txt");
    scriptToolCalls([
      { name: "write_file", arguments: { path: "inside.txt", content: "in\n" } },
      { name: "write_file", arguments: { path: target, content: "out\n" } },
    ]);
    const asked = await gw.ask("write two files");
    expect(readFileSync(join(home, "workspace", "inside.txt"), "utf8")).toBe("in\n");
    expect(asked.pending.summary).toContain(target);
    expect(asked.pending.reason).toContain("outside the sandbox's writable folders");
    expect(existsSync(target)).toBe(false);
    await gw.approve(asked.pending.id);
    expect(await asked.reply).toBe("done");
    expect(readFileSync(target, "utf8")).toBe("out\n");

    writeFileSync(join(outside, "report.txt"), "report\n");
    scriptToolCalls([{ name: "send_file", arguments: { path: join(outside, "report.txt") } }]);
    const sent = await gw.ask("send the report");
    expect(sent.pending.summary).toContain("send_file");
    expect(sent.pending.reason).toContain("outside the sandbox's writable folders");
    await gw.approve(sent.pending.id);
    // Approved, the file goes out with the reply (a link on the API).
    expect(await sent.reply).toContain("[report.txt](/files/");
  });

  it("with tools.sandbox: off nothing changes: no sandbox argument, no question, writes go through", async () => {
    const gw = await start("tools:\n  approval: off\n  sandbox: off\n");
    const target = join(outside, "written.txt");
    scriptToolCalls([
      { name: "write_file", arguments: { path: target, content: "out\n" } },
      { name: "terminal", arguments: { command: `echo cmd >> '${target}'` } },
    ]);
    expect(await gw.chat("write outside")).toBe("done");
    expect(readFileSync(target, "utf8")).toBe("out\ncmd\n");
    expect(offeredTerminal().parameters.properties).not.toHaveProperty("sandbox");
    expect((await gw.status()).sandbox?.mode).toBe("off");
  });
});

describe("tools.sandbox: auto", () => {
  it("runs in the sandbox where bubblewrap works, and /api/status says so", async () => {
    const gw = await start("{}\n");
    expect((await gw.status()).sandbox).toMatchObject({ mode: "workspace" });
  });

  it("falls back to off with a warning at start when bubblewrap is not usable", async () => {
    const gw = await start("{}\n", { KEEL_BWRAP: join(root, "no-such-bwrap") });
    const warning = logLines.find((l) => l.level === 40 && String(l.msg).startsWith("sandbox off"));
    expect(String(warning?.msg)).toMatch(/bubblewrap is not usable .*no-such-bwrap was not found/);
    expect((await gw.status()).sandbox?.mode).toBe("off");
    const target = join(outside, "written.txt");
    scriptToolCalls([{ name: "terminal", arguments: { command: `echo cmd > '${target}'` } }]);
    expect(await gw.chat("write outside")).toBe("done");
    expect(readFileSync(target, "utf8")).toBe("cmd\n");
  });
});
