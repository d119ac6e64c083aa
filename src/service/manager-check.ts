/**
 * Whether the service manager that install and the control commands talk to is reachable at
 * all: a systemd user manager needs the user's D-Bus (absent in many containers, over plain `su`
 * or ssh without a login session), launchd needs the user's GUI domain.
 */
import type { ServiceDeps, ServiceKind } from "./install.js";

/** Null when the manager answers; otherwise what is wrong and what to do instead. */
export async function serviceManagerProblem(
  kind: ServiceKind,
  system: boolean,
  deps: Pick<ServiceDeps, "run" | "uid">,
): Promise<string | null> {
  const probe =
    kind === "systemd"
      ? ["systemctl", ...(system ? [] : ["--user"]), "show-environment"]
      : ["launchctl", "print", `gui/${deps.uid}`];
  const result = await deps.run(probe);
  if (result.code === 0) return null;
  const why = (result.stderr || result.stdout).trim().split("\n")[0] || `exit code ${result.code}`;
  const what =
    kind === "launchd"
      ? `launchd's gui/${deps.uid} domain is not available (${why})`
      : system
        ? `systemd does not answer (${why})`
        : `the systemd user manager is not reachable: no user D-Bus (${why}); log in through a login session, or run \`loginctl enable-linger $USER\` once`;
  return `${what}. Without a service, \`keel gateway start\` runs the gateway as a background process.`;
}
