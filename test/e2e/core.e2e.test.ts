/**
 * The core from the outside: the built `keel` command line, spawned as a real process, against the
 * stand-in model server, talked to over HTTP and inspected with the other `keel` commands.
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as tar from "tar";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { SQLITE_COPY } from "../../src/data/backup.js";
import { SqliteStore } from "../../src/sessions/sqlite-store.js";
import { type FakeOpenAI, startFakeOpenAI } from "../fakes/openai-server.js";
import {
  freePort,
  type GatewayProcess,
  runKeel,
  startGatewayProcess,
} from "../helpers/gateway-process.js";

interface Completion {
  choices: Array<{ message: { content: string } }>;
}

let fake: FakeOpenAI;
let home: string;
let gateways: GatewayProcess[] = [];

beforeEach(async () => {
  fake = await startFakeOpenAI();
  home = mkdtempSync(join(tmpdir(), "keel-e2e-core-"));
});

afterEach(async () => {
  await Promise.all(gateways.map((g) => g.stop()));
  gateways = [];
  await fake.close();
  rmSync(home, { recursive: true, force: true });
});

const modelEnv = () => ({ OPENAI_BASE_URL: fake.baseUrl, KEEL_MODEL: "fake-model" });

async function startGateway(env: Record<string, string> = modelEnv()): Promise<GatewayProcess> {
  const gateway = await startGatewayProcess({ home, env });
  gateways.push(gateway);
  await gateway.waitForReady();
  return gateway;
}

async function send(
  gateway: GatewayProcess,
  content: string,
  sessionId?: string,
): Promise<{ status: number; text: string; sessionId: string | null }> {
  const res = await gateway.control("/v1/chat/completions", {
    method: "POST",
    headers: {
      "content-type": "application/json",
      ...(sessionId ? { "X-Session-Id": sessionId } : {}),
    },
    body: JSON.stringify({ model: "fake-model", messages: [{ role: "user", content }] }),
  });
  const body = (await res.json()) as Completion;
  return {
    status: res.status,
    text: body.choices[0]!.message.content,
    sessionId: res.headers.get("x-session-id"),
  };
}

describe("keel gateway run", () => {
  it("answers a chat over HTTP and keeps the conversation", async () => {
    const gateway = await startGateway();
    const first = await send(gateway, "echo: hello from e2e");
    expect(first).toMatchObject({ status: 200, text: "hello from e2e" });
    const second = await send(gateway, "echo: and again", first.sessionId!);
    expect(second).toMatchObject({ status: 200, text: "and again", sessionId: first.sessionId });

    const res = await gateway.control(`/api/sessions/${first.sessionId}`);
    expect(res.status).toBe(200);
    const stored = (await res.json()) as { messages: Array<{ role: string; content: string }> };
    expect(stored.messages.map((m) => m.content)).toEqual([
      "echo: hello from e2e",
      "hello from e2e",
      "echo: and again",
      "and again",
    ]);
    expect(existsSync(join(home, "state.db"))).toBe(true);
    expect(existsSync(join(home, "logs", "gateway.log"))).toBe(true);
  });

  it("runs a tool whose effect is visible on disk", async () => {
    const gateway = await startGateway();
    const reply = await send(gateway, "run: echo made-by-the-agent > proof.txt && echo written");
    expect(reply).toMatchObject({ status: 200, text: "ran: written" });
    const file = join(home, "workspace", "proof.txt");
    expect(readFileSync(file, "utf8")).toBe("made-by-the-agent\n");
  });

  it("starts without a model and answers API requests how to configure one", async () => {
    const gateway = await startGateway({});
    const ready = await gateway.fetch("/readyz");
    expect(ready.status).toBe(200);
    const res = await gateway.control("/v1/chat/completions", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ messages: [{ role: "user", content: "hello?" }] }),
    });
    expect(res.status).toBe(503);
    const { error } = (await res.json()) as { error: { code: string; message: string } };
    expect(error.code).toBe("model_not_configured");
    expect(error.message).toMatch(/No model is configured/);
    expect(error.message).toMatch(/model\.base_url/);
    expect(gateway.exitStatus).toBeNull();
  });
});

describe("keel sessions", () => {
  it("lists and shows the sessions a running gateway stored", async () => {
    const gateway = await startGateway();
    const tool = await send(gateway, "run: echo listed");
    const plain = await send(gateway, "echo: shown");

    const list = await runKeel({ home, args: ["sessions", "list"] });
    expect(list.code).toBe(0);
    expect(list.stdout).toContain(tool.sessionId!);
    expect(list.stdout).toContain(plain.sessionId!);

    const show = await runKeel({ home, args: ["sessions", "show", plain.sessionId!] });
    expect(show.code).toBe(0);
    expect(show.stdout).toContain(`Session ${plain.sessionId}`);
    expect(show.stdout).toContain("user: echo: shown");
    expect(show.stdout).toContain("assistant: shown");

    const showTool = await runKeel({ home, args: ["sessions", "show", tool.sessionId!] });
    expect(showTool.stdout).toMatch(/\[tool\] terminal .*echo listed/);
    expect(showTool.stdout).toContain("assistant: ran: listed");

    const missing = await runKeel({ home, args: ["sessions", "show", "no-such-id"] });
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain("No session with id no-such-id");
  });

  it("backs up while the gateway runs, into a verified archive whose database holds the sessions", async () => {
    const gateway = await startGateway();
    const stored = await send(gateway, "echo: keep me");
    const archive = join(home, "backup.tar.gz");
    const backup = await runKeel({ home, args: ["backup", archive] });
    expect(backup.code).toBe(0);
    expect(backup.stdout).toContain(archive);
    expect((await runKeel({ home, args: ["backup", "--verify", archive] })).code).toBe(0);
    const unpacked = join(home, "unpacked");
    mkdirSync(unpacked);
    await tar.x({ file: archive, cwd: unpacked });
    const copied = new SqliteStore(join(unpacked, SQLITE_COPY), { readonly: true });
    try {
      const transcript = await copied.loadTranscript(stored.sessionId!);
      expect(transcript.map((m) => m.message.content)).toEqual(["echo: keep me", "keep me"]);
    } finally {
      await copied.close();
    }
    const again = await runKeel({ home, args: ["backup", archive] });
    expect(again.code).toBe(1);
    expect(again.stderr).toContain("already exists");
  });
});

describe("configuration errors", () => {
  async function expectConfigExit(yaml: string, key: RegExp) {
    writeFileSync(join(home, "config.yaml"), yaml);
    const gateway = await startGatewayProcess({ home, env: modelEnv() });
    gateways.push(gateway);
    const status = await gateway.waitForExit();
    expect(status).toEqual({ code: 78, signal: null });
    expect(gateway.stderr).toMatch(key);
    expect(gateway.stderr).toContain(join(home, "config.yaml"));
  }

  it("an invalid value exits 78 naming the key and the file", async () => {
    await expectConfigExit("agent:\n  max_iterations: many\n", /agent\.max_iterations/);
  });

  it("an unknown key exits 78 naming the key and the file", async () => {
    await expectConfigExit("model:\n  nmae: fake-model\n", /model\.nmae: unknown key/);
  });

  it("YAML that does not parse exits 78 naming the file", async () => {
    await expectConfigExit("model: [unclosed\n", /not valid YAML/);
  });

  it("an invalid value in the environment exits 78 too", async () => {
    const gateway = await startGatewayProcess({
      home,
      env: { ...modelEnv(), KEEL_MAX_ITERATIONS: "lots" },
    });
    gateways.push(gateway);
    expect(await gateway.waitForExit()).toEqual({ code: 78, signal: null });
    expect(gateway.stderr).toMatch(/agent\.max_iterations/);
  });
});

describe("keel doctor", () => {
  it("exits 0 and prints its checks on a good setup with the model reachable", async () => {
    const port = String(await freePort());
    const result = await runKeel({
      home,
      args: ["doctor"],
      env: { ...modelEnv(), KEEL_HTTP_PORT: port },
    });
    expect(result.code).toBe(0);
    for (const check of ["config", "home", "store", "model", "telegram", "gateway"]) {
      expect(result.stdout).toMatch(new RegExp(`^✓ ${check}: `, "m"));
    }
    expect(result.stdout).toContain(fake.baseUrl);
    expect(result.stdout).toMatch(/gateway: not running/);
  });

  it("sees a running gateway", async () => {
    const gateway = await startGateway();
    const result = await runKeel({
      home,
      args: ["doctor"],
      env: { ...modelEnv(), KEEL_HTTP_PORT: String(gateway.port) },
    });
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/✓ gateway: running at .*\(ready\)/);
  });

  it("fails when the model endpoint is unreachable", async () => {
    const deadPort = await freePort();
    const result = await runKeel({
      home,
      args: ["doctor"],
      env: { OPENAI_BASE_URL: `http://127.0.0.1:${deadPort}/v1`, KEEL_MODEL: "m" },
    });
    expect(result.code).toBe(1);
    expect(result.stdout).toMatch(/✗ model: .*unreachable/);
  });

  it("`npm start` without a model names `keel setup` as the next step", async () => {
    const gateway = await startGateway({});
    await gateway.waitForOutput(/model: +not configured — next step: run `keel setup`/);
  });

  it("exits 78 on a bad config", async () => {
    writeFileSync(join(home, "config.yaml"), "agent:\n  max_iterations: -3\n");
    const result = await runKeel({ home, args: ["doctor"] });
    expect(result.code).toBe(78);
    expect(result.stdout).toMatch(/^✗ config: .*config\.yaml:2: agent\.max_iterations: /m);
  });
});
