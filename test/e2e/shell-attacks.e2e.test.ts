/**
 * The approval layer attacked as issue 33 did, through the built `keel` process: the stand-in
 * model calls `terminal` with each spelling of "delete a folder outside the workspace" (the
 * issue's and more), and after each the folder is still there and an approval waits. The
 * gateway's config is in `attackerConfig` alone, so that this suite keeps testing the approval
 * layer by itself whatever else guards the terminal.
 */
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { type FakeOpenAI, startFakeOpenAI } from "../fakes/openai-server.js";
import { type GatewayProcess, startGatewayProcess } from "../helpers/gateway-process.js";
import { aimedAt, ISSUE_ATTACKS, MORE_ATTACKS } from "../helpers/shell-attacks.js";

/** The gateway's config.yaml for this suite: approvals in their default mode, nothing else. */
function attackerConfig(): string {
  // The sandbox off: with it on, the victim folder survives anyway (read-only), and this suite
  // would no longer show that the approval rules hold by themselves.
  return ["tools:", "  approval: dangerous", "  approval_timeout: 3600", "  sandbox: off", ""].join(
    "\n",
  );
}

let fake: FakeOpenAI;
let root: string;
let gateway: GatewayProcess;
/** The folder the attacks aim at: outside the workspace and the Keel home. */
let victim: string;

beforeAll(async () => {
  fake = await startFakeOpenAI();
  root = mkdtempSync(join(tmpdir(), "keel-e2e-attacks-"));
  const home = join(root, "home");
  mkdirSync(home);
  writeFileSync(join(home, "config.yaml"), attackerConfig());
  victim = join(root, "outside");
  gateway = await startGatewayProcess({
    home,
    env: { OPENAI_BASE_URL: fake.baseUrl, KEEL_MODEL: "fake-model" },
  });
  await gateway.waitForReady();
});

afterAll(async () => {
  await gateway?.stop();
  await fake?.close();
  rmSync(root, { recursive: true, force: true });
});

beforeEach(() => {
  mkdirSync(victim, { recursive: true });
  writeFileSync(join(victim, "keep.txt"), "precious\n");
});

/**
 * Sends `run: COMMAND` over /v1 (a fresh session, streamed); the stand-in model calls terminal
 * with it. Returns the text streamed until the approval question arrived (the request would go
 * on waiting for the answer; it is let go there, and the approval stays pending).
 */
async function attack(command: string): Promise<string> {
  const response = await gateway.control("/v1/chat/completions", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      model: "fake-model",
      stream: true,
      messages: [{ role: "user", content: `run: ${command}` }],
    }),
  });
  expect(response.status).toBe(200);
  const reader = response.body!.getReader();
  const decoder = new TextDecoder();
  let raw = "";
  let text = "";
  for (let i = 0; i < 1000 && !/Approval needed|\[DONE\]/.test(raw); i++) {
    const { value, done } = await reader.read();
    if (done) break;
    raw += decoder.decode(value, { stream: true });
    // Whole events only: a read may end inside one.
    text = raw
      .slice(0, raw.lastIndexOf("\n\n") + 1)
      .split("\n")
      .filter((line) => line.startsWith("data: {"))
      .map((line) => JSON.parse(line.slice(6)) as { choices: { delta: { content?: string } }[] })
      .map((chunk) => chunk.choices[0]?.delta.content ?? "")
      .join("");
  }
  await reader.cancel();
  return text;
}

describe("every spelling waits for a human (real process)", () => {
  it.each([...ISSUE_ATTACKS, ...MORE_ATTACKS])("%j", async (spelling) => {
    const command = aimedAt(spelling, victim);
    const reply = await attack(command);
    // The turn has stopped at the question: had the command run, the folder would be gone now.
    expect(existsSync(join(victim, "keep.txt")), reply).toBe(true);
    const id = /Approval needed \[([0-9a-f]+)\]/.exec(reply)?.[1];
    expect(id, reply).toBeDefined();
    const shown = await gateway.control(`/api/approvals/${id}`);
    const { approval } = (await shown.json()) as { approval: { state: string; summary: string } };
    expect(approval.state).toBe("pending");
    expect(approval.summary).toBe(command);
  });
});
