/** `keel gateway install|uninstall`: the service spec from the configuration, then src/service. */
import { userInfo } from "node:os";
import type { Env } from "../config/load-config.js";
import type { Config } from "../config/schema.js";
import { writePlannedStop } from "../lifecycle/markers.js";
import { defaultKeelEntry } from "../service/install.js";
import { runInstallCommand, runUninstallCommand } from "../service/service-commands.js";
import { captureServiceEnv, type ServiceSpec } from "../service/service-spec.js";
import { liveGateway } from "./gateway-probe.js";
import type { CliIo } from "./io.js";
import { type GlobalOptions, loadForCommand } from "./load.js";
import { findServiceTarget, machineServiceDeps } from "./service-target.js";

/**
 * The unit's spec as `install` writes it: this node binary and `bin/keel.js`, the home folder,
 * the captured environment and the drain timeout. A system unit runs as the account that ran
 * `sudo` (`SUDO_USER`), or as the current account when that is not root.
 */
export function buildServiceSpec(
  config: Pick<Config, "home" | "agent">,
  env: Env,
  options: { system: boolean },
): { spec: ServiceSpec; skipped: string[] } {
  const captured = captureServiceEnv(env, { home: config.home, system: options.system });
  const account = userInfo();
  const user = env.SUDO_USER || (account.uid !== 0 ? account.username : undefined);
  const spec: ServiceSpec = {
    nodePath: process.execPath,
    keelEntry: defaultKeelEntry(),
    home: config.home,
    env: captured.env,
    drainTimeoutSeconds: config.agent.restart_drain_timeout,
    system: options.system,
    ...(options.system && user !== undefined && { user }),
  };
  return { spec, skipped: captured.skipped };
}

export async function gatewayInstall(
  options: GlobalOptions & { force?: boolean; dryRun?: boolean; system?: boolean },
  io: CliIo,
): Promise<number> {
  const loaded = loadForCommand(options, io);
  if (!loaded.ok) return loaded.code;
  const { spec, skipped } = buildServiceSpec(loaded.loaded.config, io.env, {
    system: options.system === true,
  });
  return runInstallCommand(
    {
      spec,
      skippedEnv: skipped,
      ...(options.force !== undefined && { force: options.force }),
      ...(options.dryRun !== undefined && { dryRun: options.dryRun }),
    },
    io,
    machineServiceDeps(),
  );
}

export async function gatewayUninstall(
  options: GlobalOptions & { dryRun?: boolean; system?: boolean },
  io: CliIo,
): Promise<number> {
  const loaded = loadForCommand(options, io);
  if (!loaded.ok) return loaded.code;
  const { home } = loaded.loaded.config;
  const deps = machineServiceDeps();
  const system = options.system === true;
  if (!options.dryRun) await announceServiceStop(home, system, deps);
  return runUninstallCommand({ system, dryRun: options.dryRun === true }, io, deps);
}

/**
 * Uninstall stops the service (`disable --now`); when the running gateway is the service's, the
 * planned-stop marker makes that SIGTERM a planned stop (exit 0, `stopped`) instead of an
 * unexpected one.
 */
async function announceServiceStop(
  home: string,
  system: boolean,
  deps: ReturnType<typeof machineServiceDeps>,
): Promise<void> {
  const target = await findServiceTarget(home, deps);
  if (target === null || target.system !== system) return;
  const live = await liveGateway(home);
  if (live === null) return;
  await writePlannedStop(home, { pid: live.pid, startTime: live.start_time, now: Date.now() });
}
