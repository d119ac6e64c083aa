import { type ChildProcess, spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { stat } from "node:fs/promises";
import { z } from "zod";
import type { Sandbox, SandboxState } from "../sandbox/sandbox.js";
import { defineTool, errorText, toolError } from "./define-tool.js";
import {
  isGroupAlive,
  type ProcessRegistry,
  signalRun,
  TOOL_RUN_VARIABLE,
  type ToolRun,
} from "./process-registry.js";
import type { Tool, ToolContext, ToolOutput } from "./tool.js";

export interface TerminalToolOptions {
  /**
   * Used when the model gives no `timeout`, and the most it may ask for (config
   * `agent.tool_timeout`, in ms).
   */
  defaultTimeoutMs: number;
  /** Where live process groups are recorded for the gateway's stop. */
  processes: ProcessRegistry;
  /** Output kept per command (default 50,000 characters; the middle is cut). */
  maxOutputChars?: number;
  /** Time between SIGTERM and SIGKILL when a command is stopped (default 1000 ms). */
  killGraceMs?: number;
  /** Environment of the commands (the config's scrubbed `toolEnv`); a run marker is added. */
  env: Readonly<Record<string, string>>;
  /**
   * `tools.sandbox` as resolved at start. `workspace`: commands run in the sandbox unless the
   * call says `sandbox: false` (which a human approves first); `failed`: they are refused unless
   * it says so. Absent or `off`: commands run unconfined and the argument is not offered.
   */
  sandbox?: SandboxState;
}

const TerminalArgs = z.object({
  command: z.string().min(1).describe("Shell command, run with /bin/sh -c in the working folder"),
  timeout: z
    .number()
    .positive()
    .optional()
    .describe(
      "Seconds before the command is killed (default and maximum: the configured tool timeout)",
    ),
});

const SandboxedTerminalArgs = TerminalArgs.extend({
  sandbox: z
    .boolean()
    .optional()
    .describe("false: run outside the sandbox (needs a human's approval)"),
});

type Args = z.output<typeof SandboxedTerminalArgs>;

/** How long to wait for the output pipes after the shell exited (background children may hold them). */
const PIPE_DRAIN_MS = 500;

/** The longest delay a Node timer takes; a longer one fires at once (TimeoutOverflowWarning). */
const MAX_TIMER_MS = 2_147_483_647;

/**
 * Creates the `terminal` tool: runs a command with `/bin/sh -c` in the context's cwd, in its own
 * process group, with the given environment plus a run marker. The model's `timeout` can only
 * shorten the configured one. On timeout or abort the whole group and every process carrying the
 * marker (see process-registry.ts) get SIGTERM, then SIGKILL after a grace period. Output is
 * stdout and stderr combined, middle-truncated, followed by the exit status; a non-zero exit, a
 * timeout or an interruption is `isError` with the output still included.
 *
 * With a sandbox (`options.sandbox`), the shell runs under bubblewrap instead (its outer process
 * leads the group, and the command's own pid namespace ends with it), the model is offered
 * `sandbox: false`, and such a call names itself through `outsideSandbox` so that the approval
 * gate always asks; a failure on the sandbox's walls states the limits and how to ask.
 */
export function createTerminalTool(options: TerminalToolOptions): Tool {
  const description =
    "Run a shell command in the working folder and return its combined stdout and stderr " +
    "with the exit code. Long output is truncated in the middle.";
  const state = options.sandbox;
  if (!state || state.mode === "off") {
    return defineTool({
      name: "terminal",
      description,
      schema: TerminalArgs,
      readOnly: false,
      run: (args, context) => runCommand(args, context, options),
    });
  }
  return defineTool({
    name: "terminal",
    description: `${description}${sandboxDescription(state)}`,
    schema: SandboxedTerminalArgs,
    readOnly: false,
    run: (args, context) => runCommand(args, context, options),
    outsideSandbox: (args) =>
      args.sandbox === false
        ? {
            // The exact command: approving it "for the session" covers that command alone.
            rule: `sandbox:off:${createHash("sha256").update(args.command).digest("hex").slice(0, 24)}`,
            reason: "it runs outside the sandbox",
            summary: args.command,
          }
        : null,
  });
}

/**
 * Added to the tool's description: nothing while the sandbox works, since the specs go with every
 * model call (about 50 tokens made small-window conversations overflow); a command that hits the
 * sandbox's walls is told its limits in its result instead.
 */
function sandboxDescription(state: Exclude<SandboxState, { mode: "off" }>): string {
  return state.mode === "failed" ? ' The sandbox is broken here: only "sandbox": false runs.' : "";
}

/** What the sandbox allows, in few words for the model. */
function limits(sandbox: Sandbox): string {
  const others = sandbox.writableRoots.slice(1);
  const writable =
    others.length > 0 ? `the working folder and ${others.join(", ")}` : "the working folder";
  return (
    `only ${writable} writable, private /tmp, ` +
    `${sandbox.network ? "" : "no network, "}background processes end with the command`
  );
}

type Ending =
  | { kind: "exited"; code: number | null; signal: NodeJS.Signals | null; pipesHeld: boolean }
  | { kind: "spawn_failed"; error: Error };

async function runCommand(
  args: Args,
  context: ToolContext,
  options: TerminalToolOptions,
): Promise<ToolOutput> {
  if (context.signal.aborted) return toolError("Not run: the turn was interrupted.");
  const state = options.sandbox;
  const outside = args.sandbox === false;
  if (state?.mode === "failed" && !outside) return toolError(`Not run: ${state.detail}.`);
  const sandbox = state?.mode === "workspace" && !outside ? state.sandbox : undefined;
  const cwdProblem = await checkFolder(context.cwd);
  if (cwdProblem) return toolError(cwdProblem);
  const limitMs = Math.min(options.defaultTimeoutMs, MAX_TIMER_MS);
  const requestedMs = args.timeout !== undefined ? args.timeout * 1000 : limitMs;
  const timeoutMs = Math.min(requestedMs, limitMs);
  const marker = options.processes.newMarker();
  const program = sandbox
    ? sandbox.command(context.cwd, args.command)
    : { file: "/bin/sh", args: ["-c", args.command] };
  const child = spawn(program.file, program.args, {
    cwd: context.cwd,
    detached: true,
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...options.env, [TOOL_RUN_VARIABLE]: marker },
  });
  const output = createOutputCapture(options.maxOutputChars ?? 50_000);
  for (const stream of [child.stdout, child.stderr]) {
    stream?.setEncoding("utf8");
    stream?.on("data", (text: string) => output.push(text));
  }
  const run: ToolRun | undefined =
    child.pid === undefined ? undefined : { pgid: child.pid, marker };
  if (run) options.processes.add(run);
  let stoppedBy: "timeout" | "aborted" | undefined;
  const stop = (why: "timeout" | "aborted") => {
    if (stoppedBy || !run) return;
    stoppedBy = why;
    signalRun(run, "SIGTERM");
    // Runs even after the shell has gone: it reaches whatever ignored SIGTERM.
    const grace = setTimeout(() => {
      signalRun(run, "SIGKILL");
      options.processes.delete(run);
    }, options.killGraceMs ?? 1000);
    grace.unref();
  };
  const onAbort = () => stop("aborted");
  const timer = setTimeout(() => stop("timeout"), timeoutMs);
  context.signal.addEventListener("abort", onAbort, { once: true });
  try {
    const ending = await waitForEnd(child);
    if (ending.kind === "spawn_failed") {
      return toolError(`Could not start the command: ${errorText(ending.error)}`);
    }
    const capped = requestedMs > limitMs ? limitMs : undefined;
    const result = report(output.text(), ending, stoppedBy, timeoutMs, capped);
    if (sandbox && result.isError && !stoppedBy && hitTheSandbox(result.output, sandbox)) {
      result.output += `\n[${sandboxHint(sandbox)}]`;
    }
    return result;
  } finally {
    clearTimeout(timer);
    context.signal.removeEventListener("abort", onAbort);
    // A group that outlives its shell (background children) stays recorded for killAll; a
    // child that left the group is found by its marker.
    if (run && !stoppedBy && !isGroupAlive(run.pgid)) options.processes.delete(run);
  }
}

/** Messages of a command stopped by the sandbox's walls (a write, a signal, the network). */
const WALL_MESSAGES =
  /read-only file system|permission denied|operation not permitted|\bE(ROFS|ACCES|PERM)\b/i;
const NETWORK_MESSAGES =
  /network is unreachable|could not resolve|temporary failure in name resolution|name or service not known|connection refused|\bE(NETUNREACH|AI_AGAIN|NOTFOUND|CONNREFUSED)\b/i;

function hitTheSandbox(output: string, sandbox: Sandbox): boolean {
  return WALL_MESSAGES.test(output) || (!sandbox.network && NETWORK_MESSAGES.test(output));
}

function sandboxHint(sandbox: Sandbox): string {
  return (
    `This ran in the sandbox (${limits(sandbox)}). If it failed because of that, call terminal ` +
    `again with the same command and "sandbox": false; it then waits for a human to approve it.`
  );
}

function report(
  text: string,
  ending: Extract<Ending, { kind: "exited" }>,
  stoppedBy: "timeout" | "aborted" | undefined,
  timeoutMs: number,
  cappedAtMs: number | undefined,
): ToolOutput {
  const body = text.length > 0 ? text.replace(/\n$/, "") : "(no output)";
  let status: string;
  if (stoppedBy === "timeout") status = `[killed: timed out after ${timeoutMs / 1000} s]`;
  else if (stoppedBy === "aborted") status = "[interrupted: the command was stopped]";
  else if (ending.code !== null) status = `[exit code ${ending.code}]`;
  else status = `[killed by ${ending.signal ?? "a signal"}]`;
  let note = ending.pipesHeld
    ? "\n[background processes kept the output open; later output is not shown]"
    : "";
  if (cappedAtMs !== undefined) {
    note += `\n[timeout capped at ${cappedAtMs / 1000} s, the configured agent.tool_timeout]`;
  }
  return {
    output: `${body}\n${status}${note}`,
    isError: stoppedBy !== undefined || ending.code !== 0,
  };
}

/** Resolves when the shell exited and its pipes closed, or shortly after exit if children keep them open. */
function waitForEnd(child: ChildProcess): Promise<Ending> {
  return new Promise((resolve) => {
    let drainTimer: NodeJS.Timeout | undefined;
    child.once("error", (error) => {
      clearTimeout(drainTimer);
      resolve({ kind: "spawn_failed", error });
    });
    child.once("exit", (code, signal) => {
      drainTimer = setTimeout(() => {
        child.stdout?.destroy();
        child.stderr?.destroy();
        resolve({ kind: "exited", code, signal, pipesHeld: true });
      }, PIPE_DRAIN_MS);
    });
    child.once("close", (code: number | null, signal: NodeJS.Signals | null) => {
      clearTimeout(drainTimer);
      resolve({ kind: "exited", code, signal, pipesHeld: false });
    });
  });
}

async function checkFolder(cwd: string): Promise<string | undefined> {
  try {
    if (!(await stat(cwd)).isDirectory()) return `The working folder ${cwd} is not a folder.`;
    return undefined;
  } catch (error) {
    return `The working folder ${cwd} is not usable: ${errorText(error)}`;
  }
}

/**
 * Keeps the first and last halves of a stream of text up to `maxChars` in all, counting what was
 * dropped in between, so a huge output costs bounded memory and still shows how it ended.
 */
export function createOutputCapture(maxChars: number): {
  push(text: string): void;
  text(): string;
} {
  const headLimit = Math.ceil(maxChars / 2);
  const tailLimit = maxChars - headLimit;
  let head = "";
  let tail = "";
  let total = 0;
  return {
    push(text) {
      total += text.length;
      let rest = text;
      if (head.length < headLimit) {
        const take = headLimit - head.length;
        head += rest.slice(0, take);
        rest = rest.slice(take);
      }
      if (rest.length > 0) {
        tail += rest;
        if (tail.length > tailLimit * 2) tail = tail.slice(-tailLimit);
      }
    },
    text() {
      const kept = tail.slice(-tailLimit);
      const cut = total - head.length - kept.length;
      if (cut <= 0) return head + kept;
      return `${head}\n\n[output truncated: ${cut} of ${total} characters cut from the middle]\n\n${kept}`;
    },
  };
}
