/** Which service manager (if any) runs this process, and the exit code a restart uses under it. */
import { existsSync } from "node:fs";

/** The supervisors Keel tells apart; `null` is a plain shell or anything unrecognised. */
export type ServiceManager = "systemd" | "launchd" | "container";

/** Inputs of {@link detectServiceManager}: the process environment and a file-existence probe. */
export interface DetectOptions {
  env: Readonly<Record<string, string | undefined>>;
  /** Defaults to `fs.existsSync`; tests pass their own. */
  exists?: (path: string) => boolean;
}

/**
 * Detects the supervisor per interface.md, first match wins: `INVOCATION_ID` set (systemd);
 * `XPC_SERVICE_NAME` set and not `0` (launchd); `/.dockerenv` or `/run/.containerenv` present
 * (container). Returns `null` otherwise. Never throws (a failing probe counts as absent).
 */
export function detectServiceManager(options: DetectOptions): ServiceManager | null {
  const { env } = options;
  const exists = options.exists ?? existsSync;
  if (env.INVOCATION_ID) return "systemd";
  const xpc = env.XPC_SERVICE_NAME;
  if (xpc && xpc !== "0") return "launchd";
  const probe = (path: string) => {
    try {
      return exists(path);
    } catch {
      return false; // An unreadable path is no evidence of a container.
    }
  };
  if (probe("/.dockerenv") || probe("/run/.containerenv")) return "container";
  return null;
}

/** Exit code of a planned restart that is handed to a supervisor. */
export const RESTART_EXIT_CODE = 75;

/**
 * The exit code of `keel gateway run` after a restart request (interface.md): 0 outside a service
 * manager (the detached helper starts the successor) and under systemd (a transient unit restarts
 * the unit once this process exits); 75 under launchd and in containers, whose supervisors
 * restart on a non-zero exit. Pure.
 */
export function restartExitCode(manager: ServiceManager | null): 0 | 75 {
  return manager === null || manager === "systemd" ? 0 : RESTART_EXIT_CODE;
}
