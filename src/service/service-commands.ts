/** CLI-facing bodies of `keel gateway install|uninstall` and the service part of `status`. */

import {
  installService,
  type ServiceDeps,
  serviceKindFor,
  serviceStatus,
  uninstallService,
} from "./install.js";
import { serviceManagerProblem } from "./manager-check.js";
import type { ServiceSpec } from "./service-spec.js";
import { SYSTEMD_UNIT_NAME } from "./systemd.js";

/** Where a command writes human output: `out` for results, `err` for problems and warnings. */
export interface CommandIo {
  out(line: string): void;
  err(line: string): void;
}

/** Arguments of {@link runInstallCommand}, already resolved by the CLI. */
export interface InstallCommandArgs {
  spec: ServiceSpec;
  force?: boolean;
  dryRun?: boolean;
  /** Variables deliberately left out of the unit (from `captureServiceEnv`), to tell the user. */
  skippedEnv?: readonly string[];
}

function printLines(io: CommandIo, text: string): void {
  for (const line of text.replace(/\n$/, "").split("\n")) io.out(line);
}

function nextSteps(
  io: CommandIo,
  args: InstallCommandArgs,
  kind: "systemd" | "launchd",
  replaced: boolean,
): void {
  if (kind === "launchd") {
    io.out("The launchd agent is loaded: it runs now and at every login.");
    return;
  }
  const scope = args.spec.system ? "" : "--user ";
  io.out(
    `Start it with \`keel gateway start\` (or \`systemctl ${scope}start ${SYSTEMD_UNIT_NAME}\`).`,
  );
  if (replaced) io.out("A running gateway keeps its old settings until `keel gateway restart`.");
  if (!args.spec.system) {
    io.out("To keep it running while you are logged out: `loginctl enable-linger $USER`.");
  }
}

/**
 * `keel gateway install [--force] [--dry-run] [--system]`. Exit codes: 0 installed, unchanged or
 * dry run; 1 a differing unit without `--force`, or a failure; 2 a usage error (`--system`
 * without a user to run as, or on macOS). Never throws.
 */
export async function runInstallCommand(
  args: InstallCommandArgs,
  io: CommandIo,
  deps: ServiceDeps,
): Promise<number> {
  if (args.spec.system && !args.spec.user) {
    io.err(
      "Refusing to install a system unit that runs as root: name the account to run as (e.g. run with sudo).",
    );
    return 2;
  }
  if (!args.dryRun) {
    // Check the service manager before touching anything: without it the unit is useless.
    let problem: string | null;
    try {
      problem = await serviceManagerProblem(serviceKindFor(deps.platform), args.spec.system, deps);
    } catch (err) {
      io.err((err as Error).message);
      return 2;
    }
    if (problem !== null) {
      io.err(`Not installed: ${problem}`);
      return 1;
    }
  }
  let result: Awaited<ReturnType<typeof installService>>;
  try {
    result = await installService(args, deps);
  } catch (err) {
    io.err((err as Error).message);
    return 2;
  }
  for (const name of args.skippedEnv ?? []) {
    io.err(
      `Not copied into the unit (readable by every local user): ${name}. Put it in config.yaml instead.`,
    );
  }
  switch (result.outcome) {
    case "dry-run":
      io.out(`Would write ${result.path}:`);
      printLines(io, result.text);
      io.out("Would run:");
      for (const argv of result.commands) io.out(`  ${argv.join(" ")}`);
      return 0;
    case "unchanged":
      io.out(`${result.path} is already installed and up to date.`);
      return 0;
    case "differs":
      io.err(
        `${result.path} exists with different content; run \`keel gateway install --force\` to replace it.`,
      );
      return 1;
    case "failed":
      io.err(`Install failed: ${result.error ?? "unknown error"}`);
      io.err(
        "Nothing is installed. `keel gateway start` runs the gateway as a background process instead.",
      );
      return 1;
    default:
      io.out(`${result.outcome === "replaced" ? "Replaced" : "Installed"} ${result.path}.`);
      nextSteps(io, args, result.kind, result.outcome === "replaced");
      return 0;
  }
}

/** `keel gateway uninstall [--dry-run] [--system]`. Exit 0 removed or not installed, 1 on failure. Never throws. */
export async function runUninstallCommand(
  args: { system: boolean; dryRun?: boolean },
  io: CommandIo,
  deps: ServiceDeps,
): Promise<number> {
  let result: Awaited<ReturnType<typeof uninstallService>>;
  try {
    result = await uninstallService(args, deps);
  } catch (err) {
    io.err((err as Error).message);
    return 2;
  }
  switch (result.outcome) {
    case "dry-run":
      io.out(`Would remove ${result.path} after running:`);
      for (const argv of result.commands) io.out(`  ${argv.join(" ")}`);
      return 0;
    case "not-installed":
      io.out(`No service installed at ${result.path}.`);
      return 0;
    case "failed":
      io.err(`Uninstall failed: ${result.error ?? "unknown error"}`);
      return 1;
    default:
      io.out(`Stopped the service and removed ${result.path}.`);
      if (result.warning) io.err(`warning: ${result.warning}`);
      return 0;
  }
}

/**
 * The service section of `keel gateway status`: prints whether a unit is installed, current,
 * enabled and running, and the stale-timeout warning on `err`. Returns 0 (status never fails).
 */
export async function runServiceStatusCommand(
  args: { system: boolean; drainTimeoutSeconds: number; spec?: ServiceSpec },
  io: CommandIo,
  deps: ServiceDeps,
): Promise<number> {
  let status: Awaited<ReturnType<typeof serviceStatus>>;
  try {
    status = await serviceStatus(args, deps);
  } catch (err) {
    io.out(`service: ${(err as Error).message}`);
    return 0;
  }
  if (!status.installed) {
    io.out(`service: not installed (${status.kind}; \`keel gateway install\` adds it)`);
    return 0;
  }
  const current =
    status.upToDate === false ? ", differs from `keel gateway install --dry-run`" : "";
  io.out(
    `service: ${status.kind} ${status.path} (${status.enabled ?? "unknown"}, ${status.state ?? "unknown"}${current})`,
  );
  if (status.warning !== null) io.err(`warning: ${status.warning}`);
  return 0;
}
