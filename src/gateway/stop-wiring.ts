/**
 * The stop's participants, built once by the composition root from the parts it made: the stop
 * sequence (lifecycle/stop-sequence.ts) runs over them in its fixed order: stop admitting →
 * notify → mark resume-pending → drain → interrupt → kill tool process groups → disconnect
 * platforms → persist. What differs between stops (restart or not, the plan) they read from the
 * one {@link Lifecycle}.
 */
import type { Logger } from "pino";
import type { Config } from "../config/schema.js";
import type { ChatAddress } from "../contract/platform.js";
import type { Lifecycle } from "../lifecycle/lifecycle.js";
import { writeCleanShutdown, writeRestartPending } from "../lifecycle/markers.js";
import { type StopParticipants, writesCleanShutdown } from "../lifecycle/stop-sequence.js";
import { markCutOff } from "../recovery/recovery.js";
import { queueNotice } from "../sessions/notices.js";
import type { OutboxStore, SessionStore } from "../sessions/store.js";
import type { GatewayCore } from "./core-wiring.js";
import { listHomeChannels } from "./home-channels.js";

export interface StopParts {
  config: Config;
  logger: Logger;
  store: OutboxStore & SessionStore;
  lifecycle: Lifecycle;
  core: Pick<GatewayCore, "runner" | "dispatcher" | "platforms" | "statusWriter">;
  killToolProcesses(): number;
  now: () => number;
}

/** The gateway's stop participants; `persist` writes what the lifecycle's plan says. */
export function createStopParticipants(parts: StopParts): StopParticipants {
  const { core, store, lifecycle, logger } = parts;
  const { runner } = core;
  return {
    closeAdmission: () =>
      runner.setAdmission(lifecycle.stopRequest()?.restart ? "restarting" : "stopping"),
    runningTurns: () =>
      runner.activeTurns().map((t) => ({
        sessionKey: t.sessionKey,
        address: t.address,
        agentStarted: t.agentStarted,
      })),
    notify: (address, text) => deliverNotice(parts, address, text),
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
      const killed = parts.killToolProcesses();
      if (killed > 0) logger.info({ groups: killed }, "killed tool process groups");
    },
    disconnectPlatforms: () => disconnectPlatforms(parts),
    persist: async (summary) => {
      const stop = lifecycle.stopRequest();
      const plan = lifecycle.stopPlan();
      if (!stop || !plan) throw new Error("persisting a stop nobody asked for");
      const home = parts.config.home;
      if (writesCleanShutdown(plan, summary)) await writeCleanShutdown(home, parts.now());
      if (plan.restartPending) await writeRestartPending(home, plan.restartPending);
      await core.statusWriter.update({
        gateway_state: plan.gatewayState,
        exit_reason: plan.exitReason,
        restart_requested: stop.restart,
        active_turns: runner.activeTurns().length,
      });
      await core.statusWriter.close();
      logger.info(
        { clean: summary.clean, interrupted: summary.interrupted.length },
        "turns ended; stop state persisted",
      );
    },
  };
}

export function homeChannels(config: Config): Promise<ChatAddress[]> {
  return listHomeChannels(config.home, {
    telegram: config.platforms.telegram.home_channel,
    discord: config.platforms.discord.home_channel,
    slack: config.platforms.slack.home_channel,
  });
}

/** The platforms' side of closing (also all a failed start needs). */
async function disconnectPlatforms(parts: Pick<StopParts, "core" | "logger">): Promise<void> {
  parts.core.dispatcher.stop();
  await Promise.all(
    parts.core.platforms
      .all()
      .map((a) =>
        a
          .stop()
          .catch((err: unknown) =>
            parts.logger.warn({ err, platform: a.name }, "platform stop failed"),
          ),
      ),
  );
}

/**
 * Sends a stop notice now, through the outbox row's life cycle. A notice that cannot be sent is
 * given up rather than delivered late: "restarting" after the restart would be wrong.
 */
async function deliverNotice(parts: StopParts, address: ChatAddress, text: string): Promise<void> {
  const adapter = parts.core.platforms.forAddress(address);
  if (!adapter) return;
  const row = await queueNotice(parts.store, { address, text, direct: true });
  try {
    await adapter.deliver({
      outboxId: row.id,
      sessionKey: row.sessionKey,
      sessionId: row.sessionId,
      address,
      text,
      kind: "notice",
    });
    await parts.store.markDelivered(row.id);
  } catch (err) {
    await parts.store.markDeliveryFailed(row.id, 1);
    throw err;
  }
}
