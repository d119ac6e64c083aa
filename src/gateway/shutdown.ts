/**
 * The end of a gateway's life: runs the stop sequence with the gateway's parts as participants,
 * persists what the next start needs, closes what is left, and arranges the successor of a
 * restart (detached helper, systemd transient unit, or exit 75 for the supervisor).
 */
import { readFile } from "node:fs/promises";
import type { Logger } from "pino";
import type { Config } from "../config/schema.js";
import type { ChatAddress, PlatformAdapter } from "../platforms/platform.js";
import type { OutboxDispatcher } from "../runner/outbox-dispatcher.js";
import type { Runner } from "../runner/runner.js";
import { runCommand } from "../service/install.js";
import { stopTimeoutFromDrain } from "../service/service-spec.js";
import { renderSystemdRestartCommand, SYSTEMD_UNIT_NAME } from "../service/systemd.js";
import type { Store } from "../sessions/store.js";
import { EXIT_RESTART, type Supervisor } from "./exit-code.js";
import { writeCleanShutdown, writeRestartPending } from "./markers.js";
import { markCutOff } from "./recovery.js";
import { spawnDetachedSuccessor } from "./restart-helper.js";
import type { RuntimeStatusWriter } from "./runtime-status.js";
import {
  planStopEpilogue,
  runStopSequence,
  type StopParticipants,
  type StopRequest,
  type StopSummary,
} from "./stop-sequence.js";

export interface ShutdownHooks {
  /** How to start the successor of a restart outside a supervisor. */
  relaunch(): { nodePath: string; entry: string; args: string[]; logFile: string };
}

export interface ShutdownContext extends ShutdownHooks {
  config: Config;
  logger: Logger;
  store: Store;
  runner: Runner;
  dispatcher: OutboxDispatcher;
  adapters: PlatformAdapter[];
  killToolProcesses(): number;
  homeChannels(): Promise<ChatAddress[]>;
  statusWriter: RuntimeStatusWriter;
  supervisor: Supervisor;
  closeHttp(): Promise<void>;
  releasePid(): Promise<void>;
  now(): number;
  onStopped(): void;
}

/** Runs the whole stop; resolves with the exit code. Bounded by drain timeout + ~10 s. */
export async function runShutdown(request: StopRequest, ctx: ShutdownContext): Promise<number> {
  const { config, logger } = ctx;
  logger.info(
    { restart: request.restart, signal: request.signalInitiated },
    request.restart ? "restarting" : "stopping",
  );
  let exitCode = 0;
  let epilogue: ReturnType<typeof planStopEpilogue> | null = null;
  const participants = createParticipants(request, ctx, (summary) => {
    epilogue = planStopEpilogue({ request, summary, supervisor: ctx.supervisor, now: ctx.now() });
    exitCode = epilogue.exitCode;
    return persist(ctx, epilogue, request, summary);
  });
  const summary = await runStopSequence(participants, {
    restart: request.restart,
    drainTimeoutMs: config.agent.restart_drain_timeout * 1000,
    restartCommand: request.restartCommand,
    homeChannels: await ctx.homeChannels(),
    autoResume: true,
    logger,
  });
  await withTimeout(ctx.closeHttp(), 500);
  await ctx.store.close();
  await ctx.releasePid();
  const plan =
    epilogue ?? planStopEpilogue({ request, summary, supervisor: ctx.supervisor, now: ctx.now() });
  exitCode = plan.exitCode;
  if (plan.launchDetachedSuccessor) {
    const { nodePath, entry, args, logFile } = ctx.relaunch();
    spawnDetachedSuccessor({ nodePath, entry, args, waitForPid: process.pid, logFile });
  }
  if (plan.scheduleSystemdRestart && !(await scheduleSystemdRestart(config, logger)))
    exitCode = EXIT_RESTART;
  logger.info(
    { exitCode, clean: summary.clean, interrupted: summary.interrupted.length },
    "gateway stopped",
  );
  ctx.onStopped();
  return exitCode;
}

function createParticipants(
  request: StopRequest,
  ctx: ShutdownContext,
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
    disconnectPlatforms: async () => {
      ctx.dispatcher.stop();
      await Promise.all(
        ctx.adapters.map((a) =>
          a
            .stop()
            .catch((err: unknown) =>
              ctx.logger.warn({ err, platform: a.name }, "platform stop failed"),
            ),
        ),
      );
    },
    persist: persistFn,
  };
}

/**
 * Sends a stop notice now, through the outbox row's life cycle. A notice that cannot be sent is
 * given up rather than delivered late: "restarting" after the restart would be wrong.
 */
async function deliverNotice(
  ctx: ShutdownContext,
  address: ChatAddress,
  text: string,
): Promise<void> {
  const adapter = ctx.adapters.find((a) => a.name === address.platform);
  if (!adapter) return;
  const key = `system:notices:${address.platform}:${address.chatId}`;
  const session = await ctx.store.ensureSession(key, address);
  const row = await ctx.store.enqueueOutbox({
    sessionKey: key,
    sessionId: session.sessionId,
    address,
    text,
    kind: "notice",
    direct: true,
  });
  try {
    await adapter.deliver({
      outboxId: row.id,
      sessionKey: key,
      sessionId: session.sessionId,
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
  ctx: ShutdownContext,
  epilogue: ReturnType<typeof planStopEpilogue>,
  request: StopRequest,
  summary: StopSummary,
): Promise<void> {
  const home = ctx.config.home;
  if (epilogue.cleanShutdown) await writeCleanShutdown(home, ctx.now());
  if (epilogue.restartPending) await writeRestartPending(home, epilogue.restartPending);
  await ctx.statusWriter.update({
    gateway_state: epilogue.gatewayState,
    exit_reason: request.restart ? "restart" : request.signalInitiated ? "signal" : "planned_stop",
    restart_requested: request.restart,
    active_turns: ctx.runner.activeTurns().length,
  });
  await ctx.statusWriter.flush();
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

function withTimeout(promise: Promise<void>, ms: number): Promise<void> {
  return Promise.race([promise, new Promise<void>((resolve) => setTimeout(resolve, ms).unref())]);
}
