/**
 * The bubblewrap command line a sandboxed terminal command runs under, and the probe that tells
 * whether bubblewrap works on this machine (it needs user namespaces when not run as root, which
 * some kernels and containers refuse).
 */
import { spawnSync } from "node:child_process";
import { accessSync, constants } from "node:fs";
import { delimiter, isAbsolute, join, relative } from "node:path";

/** What a sandboxed command may see and touch. Paths are absolute and already real (no links). */
export interface SandboxProfile {
  /** The Keel home: hidden under an empty tmpfs (the workspace inside it is bound back in). */
  home: string;
  /** Writable: the working folder first, then `tools.sandbox_writable`. */
  writable: readonly string[];
  /** False: a network namespace of its own (a loopback interface and nothing else). */
  network: boolean;
}

/**
 * bwrap's arguments up to and including `--`, for a command run in `cwd`. The root is bound
 * read-only; `/tmp` is private; the writable roots are bound over it; then the home is hidden and
 * the roots inside it (the workspace) are bound back. Later mounts win: a root under `/tmp` stays
 * visible, and a root that holds the home (`~` listed as writable) does not uncover it. The
 * command gets a pid namespace of its own, so everything it starts dies when it ends, and a
 * session of its own, so it cannot push input into a terminal (TIOCSTI). `--die-with-parent`:
 * nothing outlives the gateway.
 */
export function bubblewrapArgs(profile: SandboxProfile, cwd: string): string[] {
  const args = [
    "--die-with-parent",
    "--new-session",
    "--unshare-pid",
    // The shell is the namespace's pid 1: when it exits the kernel kills and reaps everything
    // else in it before bwrap sees the exit, so nothing is left once the command returns. (With
    // bwrap's own init as pid 1, bwrap reports the exit status first and tears down after.)
    "--as-pid-1",
    "--unshare-ipc",
    "--unshare-uts",
    ...(profile.network ? [] : ["--unshare-net"]),
    "--ro-bind",
    "/",
    "/",
    "--dev",
    "/dev",
    "--proc",
    "/proc",
    "--tmpfs",
    "/tmp",
  ];
  // Strictly inside: the home itself listed as writable stays hidden all the same.
  const inHome = (root: string) => root !== profile.home && isInside(root, profile.home);
  // A root that does not exist (yet) is skipped rather than failing every command.
  const bind = (root: string) => args.push("--bind-try", root, root);
  profile.writable.filter((root) => !inHome(root)).forEach(bind);
  args.push("--tmpfs", profile.home);
  profile.writable.filter(inHome).forEach(bind);
  args.push("--chdir", cwd, "--");
  return args;
}

/** True when `path` is `folder` or lies below it (both absolute and normalized). */
export function isInside(path: string, folder: string): boolean {
  const rel = relative(folder, path);
  return rel === "" || (!rel.startsWith("..") && !isAbsolute(rel));
}

/** The outcome of probing bubblewrap: the program to run, or why it cannot be used. */
export type BubblewrapProbe = { ok: true; program: string } | { ok: false; reason: string };

/**
 * Runs `true` under bubblewrap with the profile's options (pid namespace, private /proc, the
 * network switch), once, at start. `program` is a path or a name looked up in `pathVariable`.
 */
export function probeBubblewrap(
  program: string,
  pathVariable: string | undefined,
  network: boolean,
): BubblewrapProbe {
  const found = findProgram(program, pathVariable);
  if (!found) {
    return {
      ok: false,
      reason: `${program} was not found${isAbsolute(program) ? "" : " on PATH"}`,
    };
  }
  const args = [...bubblewrapArgs({ home: "/tmp", writable: [], network }, "/"), "true"];
  const result = spawnSync(found, args, { stdio: ["ignore", "ignore", "pipe"], timeout: 10_000 });
  if (result.error) return { ok: false, reason: `${found} could not run: ${result.error.message}` };
  if (result.status !== 0) {
    const said = result.stderr.toString("utf8").trim().split("\n").at(-1) ?? "";
    const exit = result.status === null ? `signal ${result.signal}` : `exit ${result.status}`;
    return { ok: false, reason: `${found} failed (${exit}${said ? `: ${said}` : ""})` };
  }
  return { ok: true, program: found };
}

/** Where to look when the tools have no PATH (as execvp does without one, and then some). */
const DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin";

function findProgram(program: string, pathVariable: string | undefined): string | undefined {
  const candidates = program.includes("/")
    ? [program]
    : (pathVariable ?? DEFAULT_PATH)
        .split(delimiter)
        .filter(Boolean)
        .map((dir) => join(dir, program));
  return candidates.find((candidate) => {
    try {
      accessSync(candidate, constants.X_OK);
      return true;
    } catch {
      return false;
    }
  });
}
