/**
 * How the gateway process ends: which supervisor runs it (it decides how a restart happens)
 * and the exit code each outcome maps to (docs/operations.md, "Exit codes").
 */

import { EXIT } from "../lib/exit-codes.js";

export type Supervisor = "systemd" | "launchd" | "container" | null;

/**
 * Detects the supervisor from the environment the process was given (passed in: only
 * src/config reads process.env) and marker files of container runtimes.
 */
export function detectSupervisor(
  env: Readonly<Record<string, string | undefined>>,
  fileExists: (path: string) => boolean,
): Supervisor {
  if ((env.INVOCATION_ID ?? "") !== "") return "systemd";
  const xpc = env.XPC_SERVICE_NAME ?? "";
  if (xpc !== "" && xpc !== "0") return "launchd";
  const probe = (path: string) => {
    try {
      return fileExists(path);
    } catch {
      return false; // An unreadable path is no evidence of a container.
    }
  };
  if (probe("/.dockerenv") || probe("/run/.containerenv")) return "container";
  return null;
}

export type ExitOutcome =
  | { kind: "planned_stop" }
  | { kind: "unexpected_signal" }
  | { kind: "restart"; supervisor: Supervisor }
  | { kind: "start_failure" }
  | { kind: "config_error" };

/**
 * 0: planned stop, SIGINT, restart outside a supervisor (the detached successor starts the new
 * one) and restart under systemd (a transient unit restarts it); 1: start failure, an
 * unexpected SIGTERM, or a store that failed for good (so `Restart=on-failure` revives it);
 * 75: restart under launchd or in a
 * container; 78: configuration error.
 */
export function exitCodeFor(outcome: ExitOutcome): number {
  switch (outcome.kind) {
    case "planned_stop":
      return EXIT.ok;
    case "unexpected_signal":
    case "start_failure":
      return EXIT.failure;
    case "config_error":
      return EXIT.config;
    case "restart":
      return outcome.supervisor === "launchd" || outcome.supervisor === "container"
        ? EXIT.restart
        : EXIT.ok;
  }
}
