/**
 * `keel chat` as a user runs it: a real process with stdin piped, talking to a running gateway
 * (or, when none runs, to one it starts in-process), against the stand-in model.
 */
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { type FakeOpenAI, startFakeOpenAI } from "../fakes/openai-server.js";
import {
  childEnv,
  freePort,
  type GatewayProcess,
  KEEL_BIN,
  runKeel,
  startGatewayProcess,
} from "../helpers/gateway-process.js";
import { waitFor } from "../helpers/wait-for.js";

let fake: FakeOpenAI;
let home: string;
let gateway: GatewayProcess | undefined;

beforeEach(async () => {
  fake = await startFakeOpenAI();
  home = mkdtempSync(join(tmpdir(), "keel-e2e-chat-"));
});

afterEach(async () => {
  await gateway?.stop();
  gateway = undefined;
  await fake.close();
  rmSync(home, { recursive: true, force: true });
});

const modelEnv = () => ({ OPENAI_BASE_URL: fake.baseUrl, KEEL_MODEL: "fake-model" });

/** The session id from the hint `keel chat` prints when it ends. */
function sessionHint(stderr: string): string {
  const match = /\(session (\S+): continue with `keel chat --session \1`\)/.exec(stderr);
  expect(match, `no session hint in:\n${stderr}`).not.toBeNull();
  return match![1]!;
}

describe("keel chat", () => {
  it("talks to the running gateway: two lines in, both replies out, one session", async () => {
    gateway = await startGatewayProcess({ home, env: modelEnv() });
    await gateway.waitForReady();
    const result = await runKeel({
      home,
      args: ["chat"],
      env: { ...modelEnv(), KEEL_HTTP_PORT: String(gateway.port) },
      input: "echo: first reply\necho: second reply\n",
    });
    expect(result.code).toBe(0);
    expect(result.stdout).toBe("first reply\nsecond reply\n");
    expect(result.stderr).not.toMatch(/no gateway running/);
    const sessionId = sessionHint(result.stderr);

    // Stored by the running gateway, as one conversation.
    const res = await gateway.control(`/api/sessions/${sessionId}`);
    expect(res.status).toBe(200);
    const stored = (await res.json()) as { messages: Array<{ content: string }> };
    expect(stored.messages.map((m) => m.content)).toEqual([
      "echo: first reply",
      "first reply",
      "echo: second reply",
      "second reply",
    ]);

    // `--session` continues it.
    const more = await runKeel({
      home,
      args: ["chat", "--session", sessionId],
      env: { ...modelEnv(), KEEL_HTTP_PORT: String(gateway.port) },
      input: "echo: third\n",
    });
    expect(more.stdout).toBe("third\n");
    expect(sessionHint(more.stderr)).toBe(sessionId);
    expect(fake.requests.at(-1)!.messages.filter((m) => m.role === "user")).toHaveLength(3);
  });

  it("shows each tool call as it starts, on stderr, apart from the reply on stdout", async () => {
    gateway = await startGatewayProcess({ home, env: modelEnv() });
    await gateway.waitForReady();
    const result = await runKeel({
      home,
      args: ["chat"],
      env: { ...modelEnv(), KEEL_HTTP_PORT: String(gateway.port) },
      input: "run: echo tool-output-42\n",
    });
    expect(result.code, result.stderr).toBe(0);
    expect(result.stderr).toContain("⚙ terminal: echo tool-output-42\n");
    expect(result.stdout).toBe("ran: tool-output-42\n");
  });

  it("asks for an approval the turn waits for, and prints the reply that follows the answer", async () => {
    gateway = await startGatewayProcess({ home, env: modelEnv() });
    await gateway.waitForReady();
    const result = await runKeel({
      home,
      args: ["chat"],
      env: { ...modelEnv(), KEEL_HTTP_PORT: String(gateway.port) },
      input: "run: rm -rf ./scratch && echo removed\ny\n",
    });
    expect(result.code, result.stderr).toBe(0);
    expect(result.stderr).toMatch(/Approve \w+\? y = once/);
    // The question, then who approved, then the turn's reply, in that order.
    expect(result.stdout).toMatch(
      /^⚠️ Approval needed \[\w+\][\s\S]*\n✅ Approved once by [^\n]+\n[\s\S]*ran: removed\n$/,
    );
  });

  it("waits for this home's gateway while it does not answer yet, then talks to it", async () => {
    gateway = await startGatewayProcess({ home, env: modelEnv() });
    await gateway.waitForReady();
    // Frozen: alive with its pid and start time, listening, but answering nothing (as while it starts).
    gateway.kill("SIGSTOP");
    const child = spawn(process.execPath, [KEEL_BIN, "--home", home, "chat"], {
      env: childEnv({ ...modelEnv(), KEEL_HTTP_PORT: String(gateway.port) }),
      stdio: ["pipe", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (t: string) => (stdout += t));
    child.stderr.setEncoding("utf8").on("data", (t: string) => (stderr += t));
    const exited = new Promise<number | null>((done) => child.once("close", done));
    try {
      await waitFor(() => /not answering yet: waiting for it/.test(stderr), {
        timeoutMs: 20_000,
        message: "keel chat waiting for the frozen gateway",
      });
    } finally {
      gateway.kill("SIGCONT");
    }
    child.stdin.end("echo: after the wait\n");
    expect(await exited, stderr).toBe(0);
    expect(stdout).toBe("after the wait\n");
    expect(stderr).not.toMatch(/no gateway running/);
  });

  it("runs an in-process gateway when none is running, and stores the session", async () => {
    const result = await runKeel({
      home,
      args: ["chat"],
      env: { ...modelEnv(), KEEL_HTTP_PORT: String(await freePort()) },
      input: "echo: alone\n",
    });
    expect(result.code).toBe(0);
    expect(result.stdout).toBe("alone\n");
    expect(result.stderr).toMatch(/no gateway running/);
    const sessionId = sessionHint(result.stderr);

    const show = await runKeel({ home, args: ["sessions", "show", sessionId] });
    expect(show.stdout).toContain("user: echo: alone");
    expect(show.stdout).toContain("assistant: alone");
  });

  it("prints a model error and carries on with the next line", async () => {
    gateway = await startGatewayProcess({ home, env: modelEnv() });
    await gateway.waitForReady();
    // The call and its model.max_retries (3) retries all fail, without waiting.
    for (let i = 0; i < 4; i++) fake.failNext(500, undefined, { "retry-after": "0" });
    const result = await runKeel({
      home,
      args: ["chat"],
      env: { ...modelEnv(), KEEL_HTTP_PORT: String(gateway.port) },
      input: "echo: fails\necho: works\n",
    });
    expect(result.code).toBe(0);
    expect(result.stderr).toMatch(/error: .*HTTP 500/);
    expect(result.stdout).toContain("works\n");
    sessionHint(result.stderr);
  });
});
