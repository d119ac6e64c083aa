/**
 * The agent's tools played as an attacker would (a prompt injection steering the model), against
 * the built `keel` process and the stand-in model: the gateway's secrets stay out of the tools'
 * environment and out of the transcript, the file tools refuse the Keel home, the home's files
 * are private, and processes a tool hid from its process group do not survive a stop.
 */
import { randomBytes, randomInt } from "node:crypto";
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { SqliteStore } from "../../src/sessions/sqlite-store.js";
import {
  type FakeChatRequest,
  type FakeOpenAI,
  type FakeToolCall,
  startFakeOpenAI,
} from "../fakes/openai-server.js";
import { type GatewayProcess, runKeel, startGatewayProcess } from "../helpers/gateway-process.js";
import { waitFor } from "../helpers/wait-for.js";

let fake: FakeOpenAI;
let root: string;
let home: string;
let gateways: GatewayProcess[] = [];
/** A sleep length no other process uses, to find this file's sleeps in /proc. */
const uniqueSeconds = String(5_000_000 + randomInt(1_000_000));

beforeEach(async () => {
  fake = await startFakeOpenAI();
  root = mkdtempSync(join(tmpdir(), "keel-e2e-sec-"));
  home = join(root, "home");
});

afterEach(async () => {
  await Promise.all(gateways.map((g) => g.stop()));
  gateways = [];
  await fake.close();
  for (const pid of pidsWithArgument(uniqueSeconds)) process.kill(pid, "SIGKILL");
  rmSync(root, { recursive: true, force: true });
});

const secret = (name: string) => `${name.toLowerCase()}-${randomBytes(8).toString("hex")}`;

/** The gateway's own secrets and a look-alike of each kind, all set in its environment. */
const SECRETS = {
  OPENAI_API_KEY: secret("OPENAI_API_KEY"),
  TELEGRAM_BOT_TOKEN: `123456:${secret("bot")}`,
  KEEL_CONTROL_TOKEN: secret("KEEL_CONTROL_TOKEN"),
  MY_SECRET: secret("MY_SECRET"),
  AWS_SECRET_ACCESS_KEY: secret("AWS"),
};

async function startGateway(env: Record<string, string> = {}): Promise<GatewayProcess> {
  const gateway = await startGatewayProcess({
    home,
    env: { OPENAI_BASE_URL: fake.baseUrl, KEEL_MODEL: "fake-model", ...env },
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

/** The tool results the model was sent, in order. */
function toolResults(requests: FakeChatRequest[]): string[] {
  const last = requests.at(-1);
  return (last?.messages ?? [])
    .filter((m) => m.role === "tool")
    .map((m) => (typeof m.content === "string" ? m.content : JSON.stringify(m.content)));
}

async function chat(gateway: GatewayProcess, token: string, text: string) {
  const res = await gateway.fetch("/v1/chat/completions", {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
    body: JSON.stringify({ model: "fake-model", messages: [{ role: "user", content: text }] }),
  });
  expect(res.status).toBe(200);
  return { sessionId: res.headers.get("x-session-id") };
}

/** Every byte the store keeps on disk (database, WAL), as text. */
function storeBytes(): string {
  return ["state.db", "state.db-wal"]
    .map((name) => join(home, name))
    .filter(existsSync)
    .map((path) => readFileSync(path).toString("latin1"))
    .join("");
}

function mode(path: string): number {
  return statSync(path).mode & 0o777;
}

/** Live (non-zombie) processes whose command line has `argument`. */
function pidsWithArgument(argument: string): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/cmdline`, "utf8").split("\0").includes(argument)) {
        pids.push(Number(entry));
      }
    } catch {
      // Gone meanwhile.
    }
  }
  return pids;
}

describe("the agent's tools and the gateway's secrets", () => {
  it("`env` shows none of the gateway's secrets, only the basics and the passthrough, and none is stored", async () => {
    mkdirSync(home, { recursive: true });
    // The bot token is set, but Telegram stays off: this test is about the variable, not the bot.
    writeFileSync(join(home, "config.yaml"), "platforms:\n  telegram:\n    enabled: false\n");
    const passthrough = secret("MY_TOOL_SETTING");
    const gateway = await startGateway({
      ...SECRETS,
      KEEL_AGENT_ENV_PASSTHROUGH: "MY_TOOL_SETTING",
      MY_TOOL_SETTING: passthrough,
    });
    scriptToolCalls([{ name: "terminal", arguments: { command: "env" } }]);
    const { sessionId } = await chat(gateway, SECRETS.KEEL_CONTROL_TOKEN, "show me your env");
    const [output = ""] = toolResults(fake.requests);
    expect(output).toContain(`MY_TOOL_SETTING=${passthrough}`);
    expect(output).toMatch(/^PATH=/m);
    for (const [name, value] of Object.entries(SECRETS)) {
      expect(output).not.toContain(value);
      expect(output).not.toContain(`${name}=`);
    }
    const stored = await gateway.control(`/api/sessions/${sessionId}`, {
      headers: { authorization: `Bearer ${SECRETS.KEEL_CONTROL_TOKEN}` },
    });
    const transcript = await stored.text();
    expect(transcript).toContain(`MY_TOOL_SETTING=${passthrough}`);
    const onDisk = storeBytes();
    expect(onDisk).toContain(passthrough);
    for (const value of Object.values(SECRETS)) {
      expect(transcript).not.toContain(value);
      expect(onDisk).not.toContain(value);
    }
  });

  it("read_file and write_file refuse ../control_token, state.db and a workspace symlink to config.yaml", async () => {
    mkdirSync(join(home, "workspace"), { recursive: true });
    const configSecret = secret("config");
    writeFileSync(join(home, "config.yaml"), `# ${configSecret}\n`);
    symlinkSync(join(home, "config.yaml"), join(home, "workspace", "notes.txt"));
    const gateway = await startGateway();
    const token = readFileSync(join(home, "control_token"), "utf8").trim();
    scriptToolCalls([
      { name: "read_file", arguments: { path: "../control_token" } },
      { name: "read_file", arguments: { path: join(home, "state.db") } },
      { name: "read_file", arguments: { path: "notes.txt" } },
      { name: "write_file", arguments: { path: "../control_token", content: "attacker" } },
      { name: "write_file", arguments: { path: "notes.txt", content: "model: {}\n" } },
    ]);
    const { sessionId } = await chat(gateway, token, "read the secrets");
    const results = toolResults(fake.requests);
    expect(results).toHaveLength(5);
    for (const result of results) expect(result).toMatch(/^Refused: .* is inside the Keel home/);
    expect(readFileSync(join(home, "control_token"), "utf8").trim()).toBe(token);
    expect(readFileSync(join(home, "config.yaml"), "utf8")).toBe(`# ${configSecret}\n`);
    const stored = await (await gateway.control(`/api/sessions/${sessionId}`)).text();
    for (const text of [stored, storeBytes()]) {
      expect(text).not.toContain(token);
      expect(text).not.toContain(configSecret);
    }
  });
});

describe("file modes of the home", () => {
  it("tightens a home created 0755 and a state.db left 0644 at start, with a warning for each", async () => {
    mkdirSync(join(home, "logs"), { recursive: true });
    const store = new SqliteStore(join(home, "state.db"));
    await store.close();
    // A control_token open to others is never adopted (hostile-home.test.ts): this one is private.
    writeFileSync(join(home, "control_token"), `${"t".repeat(32)}\n`, { mode: 0o600 });
    writeFileSync(join(home, "config.yaml"), "agent:\n  max_iterations: 5\n");
    writeFileSync(join(home, "logs", "gateway.log"), "");
    chmodSync(home, 0o755);
    chmodSync(join(home, "logs"), 0o755);
    for (const name of ["state.db", "config.yaml", "logs/gateway.log"]) {
      chmodSync(join(home, name), 0o644);
    }
    const gateway = await startGateway();
    expect(mode(home)).toBe(0o700);
    expect(mode(join(home, "logs"))).toBe(0o700);
    for (const name of [
      "state.db",
      "state.db-wal",
      "state.db-shm",
      "gateway.pid",
      "control_token",
      "config.yaml",
      "logs/gateway.log",
    ]) {
      expect({ name, mode: mode(join(home, name)) }).toEqual({ name, mode: 0o600 });
    }
    const output = gateway.output();
    expect(output).toContain(`${home} was open to other users (mode 0755); changed to 0700`);
    expect(output).toContain(
      `${join(home, "state.db")} was open to other users (mode 0644); changed to 0600`,
    );
  });

  it("creates a fresh home's files private, with no warning", async () => {
    const gateway = await startGateway();
    expect(mode(home)).toBe(0o700);
    expect(mode(join(home, "logs"))).toBe(0o700);
    for (const name of ["state.db", "state.db-wal", "gateway.pid", "control_token"]) {
      expect({ name, mode: mode(join(home, name)) }).toEqual({ name, mode: 0o600 });
    }
    expect(mode(join(home, "logs", "gateway.log"))).toBe(0o600);
    expect(gateway.output()).not.toContain("was open to other users");
  });

  it("`keel backup` writes a private copy, and names a missing folder without a stack trace", async () => {
    const copy = join(root, "backup.db");
    const ok = await runKeel({ home, args: ["backup", copy] });
    expect(ok.code).toBe(0);
    expect(mode(copy)).toBe(0o600);

    const missing = join(root, "no-such-folder");
    const failed = await runKeel({ home, args: ["backup", join(missing, "copy.db")] });
    expect(failed.code).toBe(1);
    expect(failed.stderr).toContain(`the folder ${missing} does not exist`);
    expect(failed.stderr).not.toMatch(/^\s+at /m);
    expect(existsSync(missing)).toBe(false);
  });
});

describe("processes a tool hides from its process group", () => {
  it("without the sandbox, a setsid and a double-forked sleep do not outlive the gateway's stop", async () => {
    // With the sandbox (the default) they die with the command itself: see the next describe.
    mkdirSync(home, { recursive: true });
    writeFileSync(join(home, "config.yaml"), "tools:\n  sandbox: off\n");
    const gateway = await startGateway();
    const token = readFileSync(join(home, "control_token"), "utf8").trim();
    const command = `setsid sleep ${uniqueSeconds} & (sleep ${uniqueSeconds} &) ; echo started`;
    scriptToolCalls([{ name: "terminal", arguments: { command } }]);
    await chat(gateway, token, "start background work");
    expect(toolResults(fake.requests)[0]).toContain("started");
    await waitFor(() => pidsWithArgument(uniqueSeconds).length === 2, {
      timeoutMs: 5000,
      message: "both sleeps running",
    });
    const exit = await gateway.terminate();
    expect(exit.code).not.toBeNull();
    await waitFor(() => pidsWithArgument(uniqueSeconds).length === 0, {
      timeoutMs: 5000,
      message: "both sleeps killed by the stop",
    });
  });
});

describe("the sandbox, on by default (tools.sandbox: auto, bubblewrap installed)", () => {
  it("with approvals off, a command cannot write or delete outside the workspace nor read the home, can write the workspace, and what it started in the background dies with it", async () => {
    // Outside /tmp, which the sandbox replaces with its own: the folder must be there, read-only.
    const outside = mkdtempSync(
      join(existsSync("/var/tmp") ? "/var/tmp" : tmpdir(), "keel-e2e-out-"),
    );
    try {
      writeFileSync(join(outside, "keep.txt"), "precious\n");
      // No approvals at all (rm -rf would ask otherwise): the sandbox alone holds.
      mkdirSync(home, { recursive: true });
      writeFileSync(join(home, "config.yaml"), "tools:\n  approval: off\n");
      const gateway = await startGateway();
      const token = readFileSync(join(home, "control_token"), "utf8").trim();
      const command = [
        `rm -rf '${outside}'`,
        `echo attacker > '${join(outside, "keep.txt")}'`,
        "cat ../control_token",
        `head -c 16 '${join(home, "state.db")}'`,
        "echo from-the-sandbox > made.txt && echo wrote-workspace",
        `setsid sleep ${uniqueSeconds} &`,
        `nohup sleep ${uniqueSeconds} >/dev/null 2>&1 &`,
        "echo started",
      ].join("\n");
      scriptToolCalls([{ name: "terminal", arguments: { command } }]);
      await chat(gateway, token, "try everything");
      const [output = ""] = toolResults(fake.requests);
      expect(output).toContain("started");
      expect(output).toMatch(/Read-only file system/);
      expect(output).not.toContain(token);
      expect(output).not.toContain("SQLite format");
      expect(output).toContain("wrote-workspace");
      expect(readFileSync(join(outside, "keep.txt"), "utf8")).toBe("precious\n");
      expect(readFileSync(join(home, "workspace", "made.txt"), "utf8")).toBe("from-the-sandbox\n");
      // The command has returned: nothing it started is left, with the gateway still running.
      expect(pidsWithArgument(uniqueSeconds)).toEqual([]);
      const status = (await (await gateway.control("/api/status")).json()) as {
        sandbox?: { mode: string };
      };
      expect(status.sandbox?.mode).toBe("workspace");
    } finally {
      rmSync(outside, { recursive: true, force: true });
    }
  });
});
