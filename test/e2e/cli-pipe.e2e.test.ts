/**
 * The command line in a pipeline whose reader has gone (`keel sessions list | head -1`): every
 * command stops quietly instead of dying on EPIPE with a stack trace, and every list command
 * prints JSON with `--json`.
 */
import { spawn } from "node:child_process";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { SqliteStore } from "../../src/sessions/sqlite-store.js";
import { assertBuilt, childEnv, KEEL_BIN, REPO_ROOT, runKeel } from "../helpers/gateway-process.js";
import { createTempDir } from "../helpers/temp-home.js";

let temp: ReturnType<typeof createTempDir>;

beforeEach(() => {
  temp = createTempDir("keel-e2e-pipe-");
});

afterEach(() => {
  temp.cleanup();
});

/**
 * Runs keel with its stdout a pipe whose reading end is closed before keel writes: every write
 * meets a closed pipe, as it does once `head` has exited.
 */
function runIntoClosedPipe(args: string[]): Promise<{ code: number | null; stderr: string }> {
  assertBuilt();
  const child = spawn(process.execPath, [KEEL_BIN, "--home", temp.path, ...args], {
    cwd: REPO_ROOT,
    env: childEnv({ OPENAI_BASE_URL: "http://127.0.0.1:9/v1", KEEL_MODEL: "m" }),
    stdio: ["ignore", "pipe", "pipe"],
  });
  child.stdout.destroy();
  let stderr = "";
  child.stderr.setEncoding("utf8").on("data", (s: string) => (stderr += s));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`keel ${args.join(" ")} did not finish\n${stderr}`));
    }, 20_000);
    child.once("close", (code) => {
      clearTimeout(timer);
      resolve({ code, stderr });
    });
  });
}

/** A home with a session, a pairing request and a schedule, so each list has lines to print. */
async function seedHome(): Promise<void> {
  const keel = (args: string[]) => runKeel({ home: temp.path, args });
  expect((await keel(["schedule", "add", "daily", "--every", "1h", "--prompt", "hi"])).code).toBe(
    0,
  );
  const store = new SqliteStore(`${temp.path}/state.db`);
  try {
    await store.requestPairing({
      platform: "telegram",
      userId: "4242",
      userName: "ann",
      chatId: "4242",
      ttlMs: 3_600_000,
      maxPending: 10,
    });
  } finally {
    await store.close();
  }
}

const COMMANDS = [
  ["sessions", "list"],
  ["sessions", "list", "--json"],
  ["pairing", "list"],
  ["pairing", "list", "--json"],
  ["schedule", "list"],
  ["schedule", "list", "--json"],
  ["approvals", "list", "--all"],
  ["approvals", "list", "--json"],
  ["mcp", "list"],
  ["mcp", "list", "--json"],
  ["--help"],
  ["--version"],
];

describe("keel with its output closed", () => {
  it("every command exits 0 without a stack trace", async () => {
    await seedHome();
    for (const args of COMMANDS) {
      const { code, stderr } = await runIntoClosedPipe(args);
      expect(stderr, args.join(" ")).not.toMatch(/EPIPE|Error|at .*\.js/);
      expect(code, `${args.join(" ")}: ${stderr}`).toBe(0);
    }
  });
});

describe("keel list commands with --json", () => {
  it("each prints one JSON value", async () => {
    await seedHome();
    for (const args of COMMANDS.filter((c) => c.includes("--json"))) {
      const result = await runKeel({ home: temp.path, args });
      expect(result.code, `${args.join(" ")}: ${result.stderr}`).toBe(0);
      expect(() => JSON.parse(result.stdout), args.join(" ")).not.toThrow();
    }
    const pairing = await runKeel({ home: temp.path, args: ["pairing", "list", "--json"] });
    expect(JSON.parse(pairing.stdout)).toEqual([
      expect.objectContaining({ platform: "telegram", user_id: "4242", user_name: "ann" }),
    ]);
    const approved = await runKeel({
      home: temp.path,
      args: ["pairing", "list", "--approved", "--json"],
    });
    expect(JSON.parse(approved.stdout)).toEqual([]);
  });
});
