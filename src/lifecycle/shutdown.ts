/**
 * The stop's work on the gateway's parts: the stop sequence with them as participants (and the
 * state the next start needs), and after the stop path the successor of a restart (detached
 * helper, systemd transient unit, or exit 75 for the supervisor). The order is in stop-path.ts.
 */
import { readFile } from "node:fs/promises";
import type { Logger } from "pino";
import type { Config } from "../config/schema.js";
import { EXIT } from "../lib/exit-codes.js";
import type { PlatformRegistry } from "../platforms/kit/registry.js";
import type { ChatAddress } from "../platforms/platform.js";
import { markCutOff } from "../recovery/recovery.js";
import type { OutboxDispatcher } from "../runner/outbox-dispatcher.js";
import type { Runner } from "../runner/runner.js";
import { runCommand } from "../service/install.js";
import { stopTimeoutFromDrain } from "../service/service-spec.js";
import { renderSystemdRestartCommand, SYSTEMD_UNIT_NAME } from "../service/systemd.js";
import { queueNotice } from "../sessions/notices.js";
import type { OutboxStore, SessionStore } from "../sessions/store.js";
import type { Supervisor } from "./exit-code.js";
import { writeCleanShutdown, writeRestartPending } from "./markers.js";
import { spawnDetachedSuccessor } from "./restart-helper.js";
import type { RuntimeStatusWriter } from "./runtime-status.js";
import {
  planStopEpilogue,
  runStopSequence,
  type StopParticipants,
  type StopRequest,
  type StopSummary,
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

/** The running gateway's parts, as its stop reaches them. */
export interface StoppingGateway {
  config: Config;
  logger: Logger;
  store: OutboxStore & SessionStore;
  runner: Runner;
  dispatcher: OutboxDispatcher;
  platforms: PlatformRegistry;
  killToolProcesses(): number;
  statusWriter: RuntimeStatusWriter;
  supervisor: Supervisor;
  now(): number;
}

/**
 * The stop path's "end turns and disconnect platforms" step for a stop or restart: runs the stop
 * sequence with the gateway's parts as participants and persists what the next start needs.
 */
export async function endTurnsAndPlatforms(
  request: StopRequest,
  gw: StoppingGateway,
  homeChannels: ChatAddress[],
): Promise<StopSummary> {
  const participants = createParticipants(request, gw, (summary) => persist(gw, request, summary));
  return runStopSequence(participants, {
    restart: request.restart,
    // A failed store records nothing more: a turn let run on would call tools whose results are
    // lost, and run them again after the resume.
    drainTimeoutMs: request.storeFailed ? 0 : gw.config.agent.restart_drain_timeout * 1000,
    restartCommand: request.restartCommand,
    homeChannels,
    // With a freshness window of 0 nothing continues by itself: do not promise it.
    autoResume: gw.config.agent.auto_resume_freshness > 0,
    logger: gw.logger,
  });
}

/**
 * After the stop path: arranges the successor of a restart (detached helper, systemd transient
 * unit, or exit 75 for the supervisor) and resolves with the exit code.
 */
export async function finishStop(
  request: StopRequest,
  summary: StopSummary,
  gw: Pick<StoppingGateway, "config" | "logger" | "supervisor" | "now">,
  relaunch: Relaunch,
): Promise<number> {
  const { config, logger } = gw;
  const plan = planStopEpilogue({ request, summary, supervisor: gw.supervisor, now: gw.now() });
  let exitCode = plan.exitCode;
  if (plan.launchDetachedSuccessor) {
    spawnDetachedSuccessor({ ...relaunch(), waitForPid: process.pid });
  }
  if (plan.scheduleSystemdRestart && !(await scheduleSystemdRestart(config, logger)))
    exitCode = EXIT.restart;
  logger.info(
    { exitCode, clean: summary.clean, interrupted: summary.interrupted.length },
    "gateway stopped",
  );
  return exitCode;
}

/** The platforms' side of closing without a stop sequence (a failed start). */
export async function disconnectPlatforms(
  gw: Pick<StoppingGateway, "dispatcher" | "platforms" | "logger">,
): Promise<void> {
  gw.dispatcher.stop();
  await Promise.all(
    gw.platforms
      .all()
      .map((a) =>
        a
          .stop()
          .catch((err: unknown) =>
            gw.logger.warn({ err, platform: a.name }, "platform stop failed"),
          ),
      ),
  );
}

function createParticipants(
  request: StopRequest,
  ctx: StoppingGateway,
  persistFn: (s: StopSummary) => Promise<void>,
): StopParticipants {
  const { runner, store } = ctx;
  return {
    closeAdmission: () => runner.setAdmission(request.restart ? "restarting" : "stopping"),
    runningTurns: () =>
      runner.activeTurns().map((t) => ({
        sessionKey: t.sessionKey,
        address: t.address,
        agentStarted: t.agentStarted,
      })),
    notify: (address, text) => deliverNotice(ctx, address, text),
    markResumePending: (keys, reason) =>
      markCutOff(
        store,
        keys,
        reason,
        new Map(runner.activeTurns().map((t) => [t.sessionKey, t.startedAt])),
      ),
    clearResumePending: async (keys) => {
      for (const key of keys) await store.clearResumePending(key);
    },
    waitForIdle: (ms) => runner.waitForIdle(ms),
    interruptAll: () => runner.interruptAll("shutdown"),
    killToolProcesses: () => {
      const killed = ctx.killToolProcesses();
      if (killed > 0) ctx.logger.info({ groups: killed }, "killed tool process groups");
    },
    disconnectPlatforms: () => disconnectPlatforms(ctx),
    persist: persistFn,
  };
}

/**
 * Sends a stop notice now, through the outbox row's life cycle. A notice that cannot be sent is
 * given up rather than delivered late: "restarting" after the restart would be wrong.
 */
async function deliverNotice(
  ctx: StoppingGateway,
  address: ChatAddress,
  text: string,
): Promise<void> {
  const adapter = ctx.platforms.forAddress(address);
  if (!adapter) return;
  const row = await queueNotice(ctx.store, { address, text, direct: true });
  try {
    await adapter.deliver({
      outboxId: row.id,
      sessionKey: row.sessionKey,
      sessionId: row.sessionId,
      address,
      text,
      kind: "notice",
    });
    await ctx.store.markDelivered(row.id);
  } catch (err) {
    await ctx.store.markDeliveryFailed(row.id, 1);
    throw err;
  }
}

async function persist(
  ctx: StoppingGateway,
  request: StopRequest,
  summary: StopSummary,
): Promise<void> {
  const epilogue = planStopEpilogue({
    request,
    summary,
    supervisor: ctx.supervisor,
    now: ctx.now(),
  });
  const home = ctx.config.home;
  if (epilogue.cleanShutdown) await writeCleanShutdown(home, ctx.now());
  if (epilogue.restartPending) await writeRestartPending(home, epilogue.restartPending);
  await ctx.statusWriter.update({
    gateway_state: epilogue.gatewayState,
    exit_reason: request.restart
      ? "restart"
      : request.storeFailed
        ? "store_failed"
        : request.signalInitiated
          ? "signal"
          : "planned_stop",
    restart_requested: request.restart,
    active_turns: ctx.runner.activeTurns().length,
  });
  await ctx.statusWriter.close();
  ctx.logger.debug({ summary }, "stop state persisted");
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
