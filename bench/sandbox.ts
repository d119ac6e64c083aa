/**
 * What the sandbox adds per command: the real terminal tool running `true` and a small `ls`,
 * once unconfined and once under bubblewrap (`tools.sandbox: workspace`), one command at a time,
 * alternating so that the machine's load falls on both alike.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { resolveSandbox } from "../src/agent/sandbox/sandbox.js";
import { createProcessRegistry } from "../src/agent/tools/process-registry.js";
import { createTerminalTool } from "../src/agent/tools/terminal.js";
import type { Tool } from "../src/agent/tools/tool.js";
import { percentile } from "./stats.js";

export interface SandboxBenchResult {
  commands: number;
  /** Milliseconds per command, from the tool call to its result. */
  plain: { true: Quantiles; ls: Quantiles };
  sandboxed: { true: Quantiles; ls: Quantiles };
}

interface Quantiles {
  p50: number;
  p99: number;
}

export async function runSandboxBench(commands: number): Promise<SandboxBenchResult> {
  const root = mkdtempSync(join(tmpdir(), "keel-bench-sandbox-"));
  const home = join(root, "home");
  const workspace = join(home, "workspace");
  mkdirSync(workspace, { recursive: true });
  for (let i = 0; i < 20; i += 1) writeFileSync(join(workspace, `file-${i}.txt`), `${i}\n`);
  const env = { PATH: process.env.PATH ?? "/usr/bin:/bin" };
  const state = resolveSandbox({
    setting: "workspace",
    program: "bwrap",
    pathVariable: env.PATH,
    home,
    workspace,
    writable: [],
    network: true,
  });
  if (state.mode !== "workspace") throw new Error(`the sandbox is not usable: ${state.detail}`);
  const processes = createProcessRegistry();
  const tool = (sandboxed: boolean) =>
    createTerminalTool({
      defaultTimeoutMs: 30_000,
      processes,
      env,
      ...(sandboxed && { sandbox: state }),
    });
  const plain = tool(false);
  const sandboxed = tool(true);
  const context = { cwd: workspace, signal: new AbortController().signal };
  const once = async (t: Tool, command: string) => {
    const started = performance.now();
    const result = await t.execute({ command }, context);
    if (result.isError) throw new Error(`${command} failed: ${result.output}`);
    return performance.now() - started;
  };
  const times = { plainTrue: [0], plainLs: [0], boxTrue: [0], boxLs: [0] };
  for (const list of Object.values(times)) list.length = 0;
  try {
    for (let i = 0; i < 10; i += 1) {
      await once(plain, "true");
      await once(sandboxed, "true");
    }
    for (let i = 0; i < commands; i += 1) {
      times.plainTrue.push(await once(plain, "true"));
      times.boxTrue.push(await once(sandboxed, "true"));
      times.plainLs.push(await once(plain, "ls -l"));
      times.boxLs.push(await once(sandboxed, "ls -l"));
    }
  } finally {
    processes.killAll();
    rmSync(root, { recursive: true, force: true });
  }
  const q = (values: number[]): Quantiles => {
    const sorted = [...values].sort((a, b) => a - b);
    return { p50: percentile(sorted, 50), p99: percentile(sorted, 99) };
  };
  return {
    commands,
    plain: { true: q(times.plainTrue), ls: q(times.plainLs) },
    sandboxed: { true: q(times.boxTrue), ls: q(times.boxLs) },
  };
}
