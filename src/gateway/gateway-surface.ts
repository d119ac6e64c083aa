/**
 * What the gateway's parts and the control API see of its life, read from the one
 * {@link Lifecycle}: status (`/api/status`, `gateway_state.json`), readiness (`/readyz`), the
 * maintenance drain, and stops asked for from a chat or the API. Built in the core with the
 * lifecycle the composition root made first, so nothing here waits for the gateway engine.
 */

import type { ChatAddress } from "../contract/platform.js";
import type { PlatformRegistry } from "../contract/registry.js";
import type { ControlSurface, GatewayStatus } from "../control/control-surface.js";
import { type Lifecycle, reportedState } from "../lifecycle/lifecycle.js";
import { removeDrainRequest, writeDrainRequest, writeRestartNotify } from "../lifecycle/markers.js";
import type { RuntimeStatusWriter } from "../lifecycle/runtime-status.js";
import { restartCommandReply } from "../runner/lifecycle-texts.js";
import type { Runner } from "../runner/runner.js";
import type { Store } from "../sessions/store.js";
import type { AgentParts } from "./agent-wiring.js";
import type { Cluster } from "./cluster.js";
import type { PlatformEventClock } from "./event-clock.js";
import { platformRows } from "./platform-rows.js";

export interface SurfaceParts {
  lifecycle: Lifecycle;
  home: string;
  store: Store;
  runner: Runner;
  platforms: PlatformRegistry;
  statusWriter: RuntimeStatusWriter;
  platformEvents: PlatformEventClock;
  cluster: Cluster | null;
  mcp: AgentParts["mcp"];
  sandbox: AgentParts["sandbox"];
  version: string;
  startedAt: number;
  now: () => number;
  logger: { info(msg: string): void };
}

export class GatewaySurface implements ControlSurface {
  private readonly lifecycle: Lifecycle;

  constructor(private readonly parts: SurfaceParts) {
    this.lifecycle = parts.lifecycle;
  }

  isReady(): boolean {
    // Per instance: a gateway that cannot reach the shared store is not ready, the others may be.
    return this.lifecycle.isRunning() && !this.storeDown();
  }

  /** Why `/readyz` says 503: the store first (it is what an operator must look at). */
  notReadyReason(): string | null {
    if (this.isReady()) return null;
    if (this.storeDown()) return "the store does not answer";
    return `the gateway is ${this.lifecycle.state()}`;
  }

  /** The store failed for good (SQLite), or its heartbeat does not get through (Postgres). */
  storeDown(): boolean {
    return this.parts.store.failure() !== null || !(this.parts.cluster?.healthy() ?? true);
  }

  async status(): Promise<GatewayStatus> {
    const { runner, store, platformEvents, startedAt, mcp, sandbox, cluster } = this.parts;
    const now = this.parts.now();
    const state = this.lifecycle.state();
    const turns = runner.activeTurns();
    const sessions = await store.countSessions();
    const tasks = await store.listTasks({ states: ["running", "queued"], limit: 50 });
    const platforms = platformRows(
      this.platformStates(),
      this.parts.platforms.connections(),
      (name) => platformEvents.lastEventAt(name),
      now,
    );
    return {
      gateway_state: reportedState(state),
      pid: process.pid,
      started_at: new Date(startedAt).toISOString(),
      uptime_seconds: Math.round((now - startedAt) / 1000),
      version: this.parts.version,
      active_turns: turns.length,
      draining: state === "draining",
      restart_requested: this.lifecycle.stopRequest()?.restart ?? false,
      platforms,
      sandbox: { mode: sandbox.mode, detail: sandbox.detail },
      ...(mcp && { mcp: mcp.status() }),
      turns: turns.map((t) => ({
        session_key: t.sessionKey,
        session_id: t.sessionId,
        started_at: new Date(t.startedAt).toISOString(),
        current_tool: t.currentTool,
      })),
      sessions: { total: sessions.total, resume_pending: sessions.resumePending },
      tasks: tasks.map((t) => ({
        id: t.id,
        state: t.state,
        background: t.background,
        chat: `${t.chat.platform}:${t.chat.chatId}`,
        prompt: t.prompt.slice(0, 200),
        started_at: t.startedAt === null ? null : new Date(t.startedAt).toISOString(),
      })),
      ...(cluster && { instances: await cluster.instances() }),
    };
  }

  /** Writes `gateway_state.json` from the lifecycle's state and the parts' activity. */
  async writeStatus(): Promise<void> {
    const stop = this.lifecycle.stopRequest();
    await this.parts.statusWriter.update({
      gateway_state: reportedState(this.lifecycle.state()),
      active_turns: this.parts.runner.activeTurns().length,
      platforms: this.platformStates(),
      // Shown once the stop pass begins (a stop asked while starting is not under way yet).
      ...(this.lifecycle.state() === "stopping" && { restart_requested: stop?.restart ?? false }),
    });
    this.lifecycle.emitStatusChange();
  }

  platformStates(): Record<string, { state: string; error: string | null }> {
    return Object.fromEntries(this.parts.platforms.all().map((a) => [a.name, a.status()]));
  }

  /** A platform's state changed in the background: `gateway_state.json` must show it. */
  onPlatformStatusChange(): void {
    if (this.lifecycle.state() === "stopped") return;
    void this.parts.statusWriter.update({ platforms: this.platformStates() });
    this.lifecycle.emitStatusChange();
  }

  onActiveTurnsChange(count: number): void {
    void this.parts.statusWriter.update({ active_turns: count });
    this.lifecycle.emitStatusChange();
  }

  onStatusChange(listener: () => void): () => void {
    return this.lifecycle.onStatusChange(listener);
  }

  /** Enters the maintenance drain (only from running). */
  enterDrain(): void {
    if (!this.lifecycle.moveTo("draining")) return;
    this.parts.runner.setDraining(true);
    this.parts.logger.info("external drain: not starting new turns");
    void this.writeStatus();
  }

  /** Leaves it (never when a stop overtook it). */
  leaveDrain(): void {
    if (this.lifecycle.state() !== "draining" || !this.lifecycle.moveTo("running")) return;
    this.parts.runner.setDraining(false);
    this.parts.logger.info("external drain cancelled");
    void this.writeStatus();
  }

  async drain(action: "drain" | "cancel"): Promise<{ draining: boolean }> {
    const { home, now } = this.parts;
    if (action === "drain") {
      await writeDrainRequest(home, { requested_at: now(), via: "api" });
      this.enterDrain();
    } else {
      await removeDrainRequest(home);
      this.leaveDrain();
    }
    return { draining: this.lifecycle.state() === "draining" };
  }

  async restart(): Promise<{ accepted: boolean; message: string }> {
    const { accepted } = this.lifecycle.requestStop({ restart: true, signalInitiated: false });
    return {
      accepted,
      message: accepted ? "Restart started." : "A stop or restart is already under way.",
    };
  }

  async stop(): Promise<{ accepted: boolean; message: string }> {
    const { accepted } = this.lifecycle.requestStop({ restart: false, signalInitiated: false });
    return {
      accepted,
      message: accepted ? "Stop started." : "A stop or restart is already under way.",
    };
  }

  /** A chat's `/restart`: the reply to give now, or null for none. */
  async restartFromChat(address: ChatAddress, messageId: string): Promise<string | null> {
    const already = this.lifecycle.stopRequest() !== null;
    const activeTurns = this.parts.runner.activeTurns().filter((t) => t.agentStarted).length;
    if (!already) {
      await writeRestartNotify(this.parts.home, {
        platform: address.platform,
        chat_id: address.chatId,
        thread_id: address.threadId ?? null,
        message_id: messageId,
        requested_at: this.parts.now(),
      });
      this.lifecycle.requestStop({
        restart: true,
        signalInitiated: false,
        restartCommand: { ...address, replyToMessageId: messageId },
      });
    }
    // An idle restart says nothing now: the chat hears "restarted" once the gateway is back.
    if (!already && activeTurns === 0) return null;
    return restartCommandReply({ alreadyRequested: already, activeTurns });
  }
}
