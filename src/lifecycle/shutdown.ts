/**
 * After the stop pass: the successor of a restart (detached helper, systemd transient unit, or
 * exit 75 for the supervisor), by the plan the lifecycle made when the stop was asked for.
 */
import { readFile } from "node:fs/promises";
import type { Logger } from "pino";
import type { Config } from "../config/schema.js";
import { EXIT } from "../lib/exit-codes.js";
import { runCommand } from "../service/install.js";
import { stopTimeoutFromDrain } from "../service/service-spec.js";
import { renderSystemdRestartCommand, SYSTEMD_UNIT_NAME } from "../service/systemd.js";
import { spawnDetachedSuccessor } from "./restart-helper.js";
import type { StopEpilogue } from "./stop-sequence.js";

/** How to start the successor of a restart outside a supervisor. */
export type Relaunch = () => {
  nodePath: string;
  entry: string;
  args: string[];
  logFile: string;
  /** The successor's environment; this process's when absent. */
  env?: NodeJS.ProcessEnv;
};

/** Starts the successor `plan` asks for, and resolves with the exit code. */
export async function finishStop(
  plan: StopEpilogue,
  gw: { config: Config; logger: Logger },
  relaunch: Relaunch,
): Promise<number> {
  const { config, logger } = gw;
  let exitCode = plan.exitCode;
  if (plan.launchDetachedSuccessor) {
    spawnDetachedSuccessor({ ...relaunch(), waitForPid: process.pid });
  }
  if (plan.scheduleSystemdRestart && !(await scheduleSystemdRestart(config, logger)))
    exitCode = EXIT.restart;
  logger.info({ exitCode }, "gateway stopped");
  return exitCode;
}

/** Restart under systemd: a transient unit restarts ours once this process has exited. */
async function scheduleSystemdRestart(config: Config, logger: Logger): Promise<boolean> {
  const cgroup = await readFile("/proc/self/cgroup", "utf8").catch(() => "");
  const argv = renderSystemdRestartCommand({
    unitName: SYSTEMD_UNIT_NAME,
    pid: process.pid,
    user: cgroup.includes("/user@"),
    maxWaitSeconds: stopTimeoutFromDrain(config.agent.restart_drain_timeout),
  });
  const result = await runCommand(argv);
  if (result.code !== 0)
    logger.warn(
      { stderr: result.stderr },
      "could not schedule the systemd restart; exiting 75 instead",
    );
  return result.code === 0;
}
