import { randomInt } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { waitFor } from "../../../test/helpers/wait-for.js";
import { createProcessRegistry, isGroupAlive, type ProcessRegistry } from "./process-registry.js";
import { createOutputCapture, createTerminalTool } from "./terminal.js";
import type { ToolOutput } from "./tool.js";

const TOOL_ENV = { PATH: process.env.PATH ?? "/usr/bin:/bin" };

let cwd: string;
let processes: ProcessRegistry;

beforeEach(async () => {
  cwd = await mkdtemp(join(tmpdir(), "keel-terminal-"));
  processes = createProcessRegistry();
});

afterEach(async () => {
  processes.killAll();
  // Whatever a failing test left behind (found by the unique argument it was started with).
  for (const pid of pidsWithArgument(String(uniqueSeconds))) process.kill(pid, "SIGKILL");
  await rm(cwd, { recursive: true, force: true });
});

/** A sleep length no other process on the machine uses, to find a test's sleeps in /proc. */
const uniqueSeconds = 4_000_000 + randomInt(1_000_000);

/** Live (non-zombie) processes whose command line has `argument`, from /proc. */
function pidsWithArgument(argument: string): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      // A zombie's cmdline is empty, so only live processes match.
      if (readFileSync(`/proc/${entry}/cmdline`, "utf8").split("\0").includes(argument)) {
        pids.push(Number(entry));
      }
    } catch {
      // Gone meanwhile.
    }
  }
  return pids;
}

/** Starts `sleep <uniqueSeconds>` once with setsid and once double-forked (both leave the group). */
const ESCAPING = `setsid sleep ${uniqueSeconds} & (sleep ${uniqueSeconds} &) ; echo started`;

function run(
  args: unknown,
  options: {
    signal?: AbortSignal;
    maxOutputChars?: number;
    killGraceMs?: number;
    defaultTimeoutMs?: number;
  } = {},
): Promise<ToolOutput> {
  const tool = createTerminalTool({
    defaultTimeoutMs: options.defaultTimeoutMs ?? 20_000,
    processes,
    maxOutputChars: options.maxOutputChars,
    killGraceMs: options.killGraceMs,
    env: TOOL_ENV,
  });
  return tool.execute(args, { cwd, signal: options.signal ?? new AbortController().signal });
}

async function readPid(name: string): Promise<number> {
  await waitFor(async () => (await readFile(join(cwd, name), "utf8")).trim().length > 0, {
    timeoutMs: 5000,
    message: `${name} written`,
  });
  return Number((await readFile(join(cwd, name), "utf8")).trim());
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe("terminal tool", () => {
  it("runs in the working folder and returns stdout and stderr with the exit code", async () => {
    const result = await run({ command: "pwd; echo oops >&2" });
    expect(result).toEqual({ output: `${cwd}\noops\n[exit code 0]`, isError: false });
  });

  it("reports a non-zero exit as an error but keeps the output", async () => {
    const result = await run({ command: "echo partial; exit 3" });
    expect(result).toEqual({ output: "partial\n[exit code 3]", isError: true });
  });

  it("says so when there is no output", async () => {
    expect((await run({ command: "true" })).output).toBe("(no output)\n[exit code 0]");
  });

  it("rejects invalid arguments with a message for the model", async () => {
    const result = await run({ cmd: "ls" });
    expect(result.isError).toBe(true);
    expect(result.output).toContain("Invalid arguments for terminal");
    expect(result.output).toContain("command");
  });

  it("kills the whole process group when the timeout passes", async () => {
    const result = await run({
      command: "echo $$ > shell.pid; sleep 30 & echo $! > child.pid; wait",
      timeout: 0.3,
    });
    expect(result.isError).toBe(true);
    expect(result.output).toContain("[killed: timed out after 0.3 s]");
    const shell = await readPid("shell.pid");
    const child = await readPid("child.pid");
    await waitFor(() => !isAlive(shell) && !isAlive(child), { timeoutMs: 5000 });
    await waitFor(() => processes.size === 0, { timeoutMs: 5000, message: "group forgotten" });
  });

  it("kills the process group promptly on abort", async () => {
    const controller = new AbortController();
    const pending = run(
      { command: "echo $$ > pidfile; sleep 30; echo x" },
      { signal: controller.signal },
    );
    const pid = await readPid("pidfile");
    expect(isAlive(pid)).toBe(true);
    controller.abort();
    const result = await pending;
    expect(result).toEqual({
      output: "(no output)\n[interrupted: the command was stopped]",
      isError: true,
    });
    expect(() => process.kill(pid, 0)).toThrow();
    await waitFor(() => !isGroupAlive(pid), { timeoutMs: 5000, message: "sleep killed" });
  });

  it("escalates to SIGKILL for commands that ignore SIGTERM", async () => {
    const controller = new AbortController();
    const pending = run(
      { command: "trap '' TERM; echo $$ > pidfile; sleep 30" },
      { signal: controller.signal, killGraceMs: 200 },
    );
    const pid = await readPid("pidfile");
    controller.abort();
    const result = await pending;
    expect(result.output).toContain("[interrupted");
    await waitFor(() => !isGroupAlive(pid), { timeoutMs: 5000 });
  });

  it("does not start when the turn is already interrupted", async () => {
    const controller = new AbortController();
    controller.abort();
    const result = await run({ command: "touch ran" }, { signal: controller.signal });
    expect(result.isError).toBe(true);
    await expect(readFile(join(cwd, "ran"))).rejects.toThrow();
  });

  it("cuts long output in the middle and says how much was cut", async () => {
    const result = await run(
      { command: "printf start; head -c 200000 /dev/zero | tr '\\0' a; printf end" },
      { maxOutputChars: 1000 },
    );
    expect(result.output.startsWith("start")).toBe(true);
    expect(result.output).toContain(
      "[output truncated: 199008 of 200008 characters cut from the middle]",
    );
    expect(result.output.endsWith("end\n[exit code 0]")).toBe(true);
    expect(result.output.length).toBeLessThan(1200);
  });

  it("keeps about 50,000 characters by default", async () => {
    const result = await run({ command: "head -c 120000 /dev/zero | tr '\\0' b" });
    expect(result.output).toContain("[output truncated: 70000 of 120000 characters cut");
  });

  it("lets the registry kill every running command group", async () => {
    const pending = run({ command: "echo $$ > pidfile; sleep 30" });
    const pid = await readPid("pidfile");
    await waitFor(() => processes.size === 1, { timeoutMs: 5000 });
    expect(processes.killAll()).toBe(1);
    const result = await pending;
    expect(result.isError).toBe(true);
    expect(result.output).toContain("[killed by SIGKILL]");
    expect(isAlive(pid)).toBe(false);
    expect(processes.killAll()).toBe(0);
  });

  it("returns when the shell exits even if a background child keeps the output open", async () => {
    const result = await run({ command: "sleep 30 & echo $! > child.pid; echo started" });
    expect(result.output).toContain("started\n[exit code 0]");
    expect(result.output).toContain("background processes kept the output open");
    const child = await readPid("child.pid");
    expect(processes.size).toBe(1);
    processes.killAll();
    await waitFor(() => !isAlive(child), { timeoutMs: 5000 });
  });

  it("reports a missing working folder", async () => {
    const tool = createTerminalTool({ defaultTimeoutMs: 1000, processes, env: TOOL_ENV });
    const result = await tool.execute(
      { command: "true" },
      { cwd: join(cwd, "missing"), signal: new AbortController().signal },
    );
    expect(result.isError).toBe(true);
    expect(result.output).toContain("ENOENT");
  });
});

describe("terminal tool limits", () => {
  it("runs a command normally when the model asks for a huge timeout, capped at the configured one", async () => {
    const result = await run({ command: "echo fine", timeout: 1e12 });
    expect(result).toEqual({
      output: "fine\n[exit code 0]\n[timeout capped at 20 s, the configured agent.tool_timeout]",
      isError: false,
    });
  });

  it("kills at the configured timeout when the model asks for more", async () => {
    const result = await run(
      { command: "sleep 30", timeout: 1e12 },
      { defaultTimeoutMs: 300, killGraceMs: 100 },
    );
    expect(result.isError).toBe(true);
    expect(result.output).toContain("[killed: timed out after 0.3 s]");
  });

  it("runs normally when the configured timeout itself is beyond what a timer can hold", async () => {
    const result = await run({ command: "echo fine" }, { defaultTimeoutMs: 1e15 });
    expect(result).toEqual({ output: "fine\n[exit code 0]", isError: false });
  });

  it("rejects a timeout that is not a positive finite number", async () => {
    for (const timeout of [Number.NaN, -5, 0, Number.POSITIVE_INFINITY, "10"]) {
      const result = await run({ command: "echo never", timeout });
      expect(result.isError).toBe(true);
      expect(result.output).toContain("Invalid arguments for terminal");
    }
  });

  it("gives commands only the environment it was given, plus the run marker", async () => {
    const result = await run({ command: "env" });
    const names = result.output
      .split("\n")
      .filter((line) => line.includes("="))
      .map((line) => line.slice(0, line.indexOf("=")));
    // sh itself adds PWD (and dash may add OLDPWD); nothing of the test runner's own environment.
    expect(names.filter((n) => !["PWD", "OLDPWD", "SHLVL", "_"].includes(n)).sort()).toEqual([
      "KEEL_TOOL_RUN",
      "PATH",
    ]);
  });
});

describe("terminal tool and processes that leave the process group", () => {
  it("kills setsid and double-forked children when the command is interrupted", async () => {
    const controller = new AbortController();
    const pending = run(
      { command: `${ESCAPING}; sleep ${uniqueSeconds}` },
      { signal: controller.signal, killGraceMs: 200 },
    );
    await waitFor(() => pidsWithArgument(String(uniqueSeconds)).length === 3, {
      timeoutMs: 5000,
      message: "three sleeps started",
    });
    controller.abort();
    expect((await pending).output).toContain("[interrupted");
    await waitFor(() => pidsWithArgument(String(uniqueSeconds)).length === 0, {
      timeoutMs: 5000,
      message: "every sleep killed",
    });
  });

  it("kills a finished command's escaped children with killAll, even once its group is gone", async () => {
    const result = await run({ command: `setsid sleep ${uniqueSeconds} & echo started` });
    expect(result.output).toContain("started");
    await waitFor(() => pidsWithArgument(String(uniqueSeconds)).length === 1, {
      timeoutMs: 5000,
      message: "the sleep started",
    });
    await waitFor(() => processes.size === 0, { timeoutMs: 5000, message: "group forgotten" });
    const second = await run({ command: ESCAPING });
    expect(second.output).toContain("started");
    await waitFor(() => pidsWithArgument(String(uniqueSeconds)).length === 3, {
      timeoutMs: 5000,
      message: "three sleeps running",
    });
    expect(processes.killAll()).toBe(2);
    await waitFor(() => pidsWithArgument(String(uniqueSeconds)).length === 0, {
      timeoutMs: 5000,
      message: "every sleep killed",
    });
  });
});

describe("createOutputCapture", () => {
  it("keeps everything under the limit, across many pushes", () => {
    const capture = createOutputCapture(10);
    for (const piece of ["ab", "cd", "ef", "gh"]) capture.push(piece);
    expect(capture.text()).toBe("abcdefgh");
  });

  it("keeps the head and the tail of a long stream", () => {
    const capture = createOutputCapture(6);
    for (const piece of ["abc", "def", "ghi", "jkl"]) capture.push(piece);
    expect(capture.text()).toBe(
      "abc\n\n[output truncated: 6 of 12 characters cut from the middle]\n\njkl",
    );
  });
});
