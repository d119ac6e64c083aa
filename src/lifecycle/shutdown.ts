/**
 * The stop pass, driven from here once a stop is asked for: the lifecycle moves to `stopping`,
 * the stop path closes the parts in its order (one of its steps is the stop sequence over the
 * participants the composition root built), then the successor of a restart starts (detached
 * helper, systemd transient unit, or exit 75 for the supervisor) and the process exits, both by
 * the plan the lifecycle made when the stop was asked for. The gateway's side is only the parts'
 * own closing and the participants.
 */
import { readFile } from "node:fs/promises";
import type { Logger } from "pino";
import type { Config } from "../config/schema.js";
import type { ChatAddress } from "../contract/platform.js";
import { EXIT } from "../lib/exit-codes.js";
import { runCommand } from "../service/install.js";
import { stopTimeoutFromDrain } from "../service/service-spec.js";
import { renderSystemdRestartCommand, SYSTEMD_UNIT_NAME } from "../service/systemd.js";
import type { Lifecycle } from "./lifecycle.js";
import { spawnDetachedSuccessor } from "./restart-helper.js";
import type { StopPath } from "./stop-path.js";
import {
  runStopSequence,
  type StopEpilogue,
  type StopParticipants,
  type StopRequest,
} from "./stop-sequence.js";

/** How to start the successor of a restart outside a supervisor. */
export type Relaunch = () => {
  nodePath: string;
  entry: string;
  args: string[];
  logFile: string;
  /** The successor's environment; this process's when absent. */
  env?: NodeJS.ProcessEnv;
};

export interface StopPassParts {
  lifecycle: Lifecycle;
  stopPath: StopPath<StopRequest | null>;
  /** Shows the stop under way (`gateway_state.json`, the status stream) before anything closes. */
  announce(): Promise<void>;
  config: Config;
  logger: Logger;
  relaunch: Relaunch;
}

/**
 * Waits for the lifecycle's stop request, then runs the one stop pass and settles `exited` with
 * the planned exit code (1 when the pass itself failed). Call it once the gateway has started.
 */
export async function runStopPass(parts: StopPassParts): Promise<void> {
  const { lifecycle, logger } = parts;
  const request = await lifecycle.whenStopAsked();
  let code = 1;
  try {
    lifecycle.moveTo("stopping");
    await parts.announce();
    logger.info(
      { restart: request.restart, signal: request.signalInitiated && !request.storeFailed },
      request.restart ? "restarting" : "stopping",
    );
    await parts.stopPath.run(request, logger);
    const plan = lifecycle.stopPlan();
    if (!plan) throw new Error("a stop ran without a plan");
    code = await finishStop(plan, parts, parts.relaunch);
  } catch (err) {
    logger.error({ err }, "stop failed");
  }
  lifecycle.finish(code);
}

/**
 * The stop path's "end turns and disconnect platforms" step: the stop sequence over the
 * participants for a stop or restart; only the platforms' disconnect after a failed start.
 */
export function stopSequenceStep(
  participants: StopParticipants,
  config: Config,
  logger: Logger,
  homeChannels: () => Promise<ChatAddress[]>,
): (request: StopRequest | null) => Promise<void> {
  return async (request) => {
    if (!request) return participants.disconnectPlatforms();
    await runStopSequence(participants, {
      restart: request.restart,
      // A failed store records nothing more: a turn let run on would call tools whose results
      // are lost, and run them again after the resume.
      drainTimeoutMs: request.storeFailed ? 0 : config.agent.restart_drain_timeout * 1000,
      restartCommand: request.restartCommand,
      homeChannels: await homeChannels(),
      // With a freshness window of 0 nothing continues by itself: do not promise it.
      autoResume: config.agent.auto_resume_freshness > 0,
      logger,
    });
  };
}

/** Starts the successor `plan` asks for, and resolves with the exit code. */
async function finishStop(
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
