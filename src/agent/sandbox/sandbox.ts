/**
 * The execution boundary (`tools.sandbox`): whether terminal commands run under bubblewrap, and
 * the view the file tools share with them (which paths are writable without a human). Decided
 * once, at start: `auto` probes bubblewrap and falls back to no sandbox with a warning.
 */
import { lstatSync, readlinkSync, realpathSync } from "node:fs";
import { basename, dirname, isAbsolute, join, resolve } from "node:path";
import type { Config } from "../../config/schema.js";
import { type BubblewrapProbe, bubblewrapArgs, isInside, probeBubblewrap } from "./bubblewrap.js";

export interface SandboxOptions {
  setting: Config["tools"]["sandbox"];
  /** The bubblewrap program: a path, or a name looked up in `pathVariable`. */
  program: string;
  pathVariable: string | undefined;
  home: string;
  /** The agent's working folder: always writable. */
  workspace: string;
  /** `tools.sandbox_writable`; relative paths are taken from the home, as `agent.cwd` is. */
  writable: readonly string[];
  network: boolean;
}

/** What the sandbox leaves writable: the file tools share this view with the commands. */
export interface SandboxView {
  /** The real paths writable inside: the working folder, then `tools.sandbox_writable`. */
  readonly writableRoots: readonly string[];
  readonly network: boolean;
  /**
   * Where `path` (relative to the working folder) really is, links resolved, and whether that is
   * under a writable root. A path that cannot be resolved (a link loop, a folder we may not
   * search) is not writable: a human decides. `hidden`: inside the Keel home and not writable,
   * which the sandbox hides and the file tools refuse (home-guard.ts), so no human is asked.
   */
  locate(path: string): { realPath: string; writable: boolean; hidden: boolean };
}

/** A sandbox in force: its view, and how to run a command in it. */
export interface Sandbox extends SandboxView {
  /** The program and arguments that run `/bin/sh -c command` in `cwd`, inside the sandbox. */
  command(cwd: string, command: string): { file: string; args: string[] };
}

/**
 * The outcome at start: `sandbox` is set when commands run in the sandbox; `off` explains why
 * not (for `keel doctor`, `/api/status` and the log); `failed` is `workspace` asked for
 * explicitly but unusable, where every command is refused instead of running unconfined.
 */
export type SandboxState =
  | { mode: "workspace"; sandbox: Sandbox; detail: string }
  | { mode: "off"; detail: string; warning?: string }
  | { mode: "failed"; view: SandboxView; detail: string };

/** The sandbox settings of a loaded config (the gateway's start and `keel doctor` read the same). */
export function sandboxOptions(config: Config): SandboxOptions {
  return {
    setting: config.tools.sandbox,
    program: config.bwrapProgram,
    pathVariable: config.toolEnv.PATH,
    home: config.home,
    workspace: config.cwd,
    writable: config.tools.sandbox_writable,
    network: config.tools.sandbox_network,
  };
}

/** The view the file tools share with the commands; none when there is no sandbox. */
export function sandboxView(state: SandboxState): SandboxView | undefined {
  if (state.mode === "workspace") return state.sandbox;
  return state.mode === "failed" ? state.view : undefined;
}

/** Resolves `tools.sandbox` (probing bubblewrap unless it is `off`). */
export function resolveSandbox(
  options: SandboxOptions,
  probe: (
    program: string,
    path: string | undefined,
    network: boolean,
  ) => BubblewrapProbe = probeBubblewrap,
): SandboxState {
  if (options.setting === "off") {
    return { mode: "off", detail: "off (tools.sandbox: off): commands run unconfined" };
  }
  const roots = [options.workspace, ...options.writable].map((p) =>
    realOrAsIs(isAbsolute(p) ? p : resolve(options.home, p)),
  );
  const writableRoots = [...new Set(roots)];
  const home = realOrAsIs(options.home);
  const view: SandboxView = {
    writableRoots,
    network: options.network,
    locate(path) {
      const absolute = resolve(options.workspace, path);
      try {
        const realPath = realPathOf(absolute);
        const writable = writableRoots.some((root) => isInside(realPath, root));
        return { realPath, writable, hidden: !writable && isInside(realPath, home) };
      } catch {
        return { realPath: absolute, writable: false, hidden: false };
      }
    },
  };
  const probed = probe(options.program, options.pathVariable, options.network);
  if (!probed.ok) {
    if (options.setting === "workspace") {
      return {
        mode: "failed",
        view,
        detail: `tools.sandbox is workspace but bubblewrap is not usable: ${probed.reason}; terminal commands are refused until it is (or set tools.sandbox: off)`,
      };
    }
    const detail = `off: bubblewrap is not usable (${probed.reason}), so terminal commands run unconfined; install bubblewrap (apt-get install bubblewrap), or set tools.sandbox: off to silence this`;
    return { mode: "off", detail, warning: `sandbox ${detail}` };
  }
  const profile = { home, writable: writableRoots, network: options.network };
  const sandbox: Sandbox = {
    ...view,
    command(cwd, command) {
      const args = [...bubblewrapArgs(profile, realOrAsIs(cwd)), "/bin/sh", "-c", command];
      return { file: probed.program, args };
    },
  };
  const network = options.network ? "network on" : "network off";
  const detail = `workspace (${probed.program}): writable ${writableRoots.join(", ")}; ${network}`;
  return { mode: "workspace", sandbox, detail };
}

function realOrAsIs(path: string): string {
  try {
    return realPathOf(path);
  } catch {
    return path;
  }
}

/** Symlinks followed at most while resolving one path (as the kernel's ELOOP limit). */
const MAX_LINKS = 40;

/**
 * The real path of `path`, which need not exist (synchronous, for the approval check): the
 * longest existing prefix resolved by the system, a dangling link followed by hand, the rest
 * appended. The same rule as home-guard's `resolveReal`.
 */
export function realPathOf(path: string, linksLeft = MAX_LINKS): string {
  try {
    return realpathSync(path);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code !== "ENOENT" && code !== "ENOTDIR") throw error;
  }
  const parent = dirname(path);
  if (parent === path) return path;
  const candidate = join(realPathOf(parent, linksLeft), basename(path));
  let isLink = false;
  try {
    isLink = lstatSync(candidate).isSymbolicLink();
  } catch {
    // Missing: the rest of the path is appended as it is.
  }
  if (isLink && linksLeft > 0) {
    return realPathOf(resolve(dirname(candidate), readlinkSync(candidate)), linksLeft - 1);
  }
  return candidate;
}
