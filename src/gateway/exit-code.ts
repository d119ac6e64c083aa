/**
 * How the gateway process ends: which supervisor runs it (it decides how a restart happens)
 * and the exit code each outcome maps to (interface.md).
 */

export type Supervisor = "systemd" | "launchd" | "container" | null;

export const EXIT_OK = 0;
export const EXIT_FAILURE = 1;
/** EX_TEMPFAIL: "restart me" for launchd / containers. */
export const EXIT_RESTART = 75;
/** EX_CONFIG: do not restart, fix the configuration. */
export const EXIT_CONFIG = 78;

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
  if (fileExists("/.dockerenv") || fileExists("/run/.containerenv")) return "container";
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
 * one) and restart under systemd (a transient unit restarts it); 1: start failure or an
 * unexpected SIGTERM (so `Restart=on-failure` revives it); 75: restart under launchd or in a
 * container; 78: configuration error.
 */
export function exitCodeFor(outcome: ExitOutcome): number {
  switch (outcome.kind) {
    case "planned_stop":
      return EXIT_OK;
    case "unexpected_signal":
    case "start_failure":
      return EXIT_FAILURE;
    case "config_error":
      return EXIT_CONFIG;
    case "restart":
      return outcome.supervisor === "launchd" || outcome.supervisor === "container"
        ? EXIT_RESTART
        : EXIT_OK;
  }
}
