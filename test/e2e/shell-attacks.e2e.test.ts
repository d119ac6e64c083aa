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

/** Sends `run: COMMAND` over /v1 (a fresh session); the stand-in model calls terminal with it. */
async function attack(command: string): Promise<string> {
  const response = await gateway.control("/v1/chat/completions", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      model: "fake-model",
      messages: [{ role: "user", content: `run: ${command}` }],
    }),
  });
  expect(response.status).toBe(200);
  const body = (await response.json()) as { choices: { message: { content: string } }[] };
  return body.choices[0]!.message.content;
}

describe("every spelling waits for a human (real process)", () => {
  it.each([...ISSUE_ATTACKS, ...MORE_ATTACKS])("%j", async (spelling) => {
    const command = aimedAt(spelling, victim);
    const reply = await attack(command);
    // The turn has ended (the reply came): had the command run, the folder would be gone now.
    expect(existsSync(join(victim, "keep.txt")), reply).toBe(true);
    const id = /Approval needed \[([0-9a-f]+)\]/.exec(reply)?.[1];
    expect(id, reply).toBeDefined();
    const shown = await gateway.control(`/api/approvals/${id}`);
    const { approval } = (await shown.json()) as { approval: { state: string; summary: string } };
    expect(approval.state).toBe("pending");
    expect(approval.summary).toBe(command);
  });
});
