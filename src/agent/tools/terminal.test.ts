import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { waitFor } from "../../../test/helpers/wait-for.js";
import { createProcessRegistry, isGroupAlive, type ProcessRegistry } from "./process-registry.js";
import { createOutputCapture, createTerminalTool } from "./terminal.js";
import type { ToolOutput } from "./tool.js";

let cwd: string;
let processes: ProcessRegistry;

beforeEach(async () => {
  cwd = await mkdtemp(join(tmpdir(), "keel-terminal-"));
  processes = createProcessRegistry();
});

afterEach(async () => {
  processes.killAll();
  await rm(cwd, { recursive: true, force: true });
});

function run(
  args: unknown,
  options: { signal?: AbortSignal; maxOutputChars?: number; killGraceMs?: number } = {},
): Promise<ToolOutput> {
  const tool = createTerminalTool({
    defaultTimeoutMs: 20_000,
    processes,
    maxOutputChars: options.maxOutputChars,
    killGraceMs: options.killGraceMs,
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
    const tool = createTerminalTool({ defaultTimeoutMs: 1000, processes });
    const result = await tool.execute(
      { command: "true" },
      { cwd: join(cwd, "missing"), signal: new AbortController().signal },
    );
    expect(result.isError).toBe(true);
    expect(result.output).toContain("ENOENT");
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
