/**
 * Whether `keel gateway start|stop|restart` should go through the service manager: only when a
 * systemd unit or launchd agent is installed FOR THIS HOME FOLDER (a unit for `~/.keel` must not
 * be started by a command aimed at another home).
 */
import { readFile } from "node:fs/promises";
import { homedir, userInfo } from "node:os";
import {
  runCommand,
  type ServiceDeps,
  type ServiceKind,
  serviceKindFor,
  serviceUnitPath,
} from "../service/install.js";
import { escapeXml, LAUNCHD_LABEL } from "../service/launchd.js";
import { quoteSystemdWord, SYSTEMD_UNIT_NAME } from "../service/systemd.js";

/** An installed service that runs the gateway of the home folder in question. */
export interface ServiceTarget {
  kind: ServiceKind;
  /** A system-wide systemd unit rather than a user unit. */
  system: boolean;
  path: string;
}

/** The real machine: `systemctl`/`launchctl` through execFile, the account's home and uid. */
export function machineServiceDeps(): ServiceDeps {
  return {
    run: runCommand,
    platform: process.platform,
    homeDir: homedir(),
    uid: process.getuid?.() ?? userInfo().uid,
  };
}

/**
 * True when an installed unit or plist runs the gateway with `--home <home>`: the home appears as
 * the word after `--home` in `ExecStart=` (systemd quoting) or as the plist string after
 * `--home`. Pure.
 */
export function unitServesHome(kind: ServiceKind, unitText: string, home: string): boolean {
  if (kind === "systemd") {
    const word = quoteSystemdWord(home, { dollar: true });
    return unitText
      .split("\n")
      .some((line) => line.startsWith("ExecStart=") && `${line} `.includes(` --home ${word} `));
  }
  const pattern = /<string>--home<\/string>\s*<string>([^<]*)<\/string>/;
  return pattern.exec(unitText)?.[1] === escapeXml(home);
}

/**
 * The installed service for `home`, if any: on Linux the user unit first, then the system unit;
 * on macOS the launchd agent. Null on other platforms or when nothing matching is installed.
 */
export async function findServiceTarget(
  home: string,
  deps: Omit<ServiceDeps, "run" | "uid">,
): Promise<ServiceTarget | null> {
  let kind: ServiceKind;
  try {
    kind = serviceKindFor(deps.platform);
  } catch {
    return null;
  }
  for (const system of kind === "systemd" ? [false, true] : [false]) {
    const path = serviceUnitPath(deps, system);
    let text: string;
    try {
      text = await readFile(path, "utf8");
    } catch {
      continue;
    }
    if (unitServesHome(kind, text, home)) return { kind, system, path };
  }
  return null;
}

/** `systemctl [--user] <verb> [--no-block] keel-gateway.service`. Pure. */
export function systemctlCommand(
  target: ServiceTarget,
  verb: "start" | "stop" | "reload" | "is-active",
): string[] {
  const scope = target.system ? [] : ["--user"];
  // Never wait inside systemctl: a stop may take the whole drain, and the CLI waits itself.
  const noBlock = verb === "is-active" ? [] : ["--no-block"];
  return ["systemctl", ...scope, verb, ...noBlock, SYSTEMD_UNIT_NAME];
}

/** `launchctl kickstart gui/<uid>/ai.keel.gateway`: starts the loaded agent now. Pure. */
export function launchctlKickstart(uid: number): string[] {
  return ["launchctl", "kickstart", `gui/${uid}/${LAUNCHD_LABEL}`];
}

/** True when systemd reports the unit active (or activating / reloading). */
export async function systemdUnitActive(
  target: ServiceTarget,
  deps: Pick<ServiceDeps, "run">,
): Promise<boolean> {
  const result = await deps.run(systemctlCommand(target, "is-active"));
  const word = result.stdout.trim().split("\n")[0] ?? "";
  return ["active", "activating", "reloading"].includes(word);
}
