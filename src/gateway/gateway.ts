/**
 * The gateway engine: starts the parts the composition root (`create-gateway.ts`) built and hooked
 * together (`core-wiring.ts`) in order, arms each one's step of the stop path as it comes up, and
 * runs that path once when the {@link Lifecycle} says a stop was asked for. Its state lives in the
 * lifecycle, not here.
 */
import type { Logger } from "pino";
import { createGatewayAlerts, type GatewayAlerts } from "../alerts/gateway-alerts.js";
import { freeShareOf } from "../alerts/gateway-conditions.js";
import type { Approvals } from "../approvals/approvals.js";
import type { Config } from "../config/schema.js";
import type { ChatAddress } from "../contract/platform.js";
import type { PlatformRegistry } from "../contract/registry.js";
import type { GatewayStatus } from "../control/control-surface.js";
import type { HttpServer } from "../control/http-server.js";
import { startDataJobs } from "../data/data-jobs.js";
import type { CrashPoint } from "../lib/crash-point.js";
import { startDrainWatcher } from "../lifecycle/drain-watcher.js";
import { describeModeFix, enforceHomeModes } from "../lifecycle/home-modes.js";
import type { Lifecycle, StopAsk } from "../lifecycle/lifecycle.js";
import type { Watcher } from "../lifecycle/lifecycle-phase.js";
import {
  consumeCleanShutdown,
  consumeRestartNotify,
  consumeRestartPending,
  readDrainRequest,
} from "../lifecycle/markers.js";
import { startMemorySettle } from "../lifecycle/memory-settle.js";
import { acquirePidFile } from "../lifecycle/pid-file.js";
import { startPlannedStopWatcher } from "../lifecycle/planned-stop-watcher.js";
import type { RuntimeStatusWriter } from "../lifecycle/runtime-status.js";
import { type Relaunch, runStopPass, stopSequenceStep } from "../lifecycle/shutdown.js";
import type { StopPath } from "../lifecycle/stop-path.js";
import type { StopParticipants, StopRequest } from "../lifecycle/stop-sequence.js";
import { startStoreFailureWatcher } from "../lifecycle/store-failure-watcher.js";
import { recoverInterruptedWork } from "../recovery/recovery.js";
import { resumeHeldBack, resumeInterruptedSessions } from "../recovery/startup-resume.js";
import { ONLINE_NOTICE, RESTARTED_NOTICE } from "../runner/lifecycle-texts.js";
import type { OutboxDispatcher } from "../runner/outbox-dispatcher.js";
import type { Runner } from "../runner/runner.js";
import type { ScheduleBook } from "../schedules/book.js";
import type { Scheduler } from "../schedules/scheduler.js";
import type { Store } from "../sessions/store.js";
import type { AgentParts } from "./agent-wiring.js";
import type { Cluster } from "./cluster.js";
import type { GatewayCore } from "./core-wiring.js";
import type { GatewaySurface } from "./gateway-surface.js";
import { homeChannels } from "./stop-wiring.js";

/** The parts the composition root built, and the seams of this gateway's surroundings. */
export interface GatewayParts {
  config: Config;
  logger: Logger;
  store: Store;
  agent: AgentParts;
  /** The runner, outbox, approvals, scheduler, HTTP server and adapters (core-wiring.ts). */
  core: GatewayCore;
  /** The gateway's life: its state, the stop asked for and its plan, the exit code. */
  lifecycle: Lifecycle;
  /** How this gateway closes: each part arms its step as it starts (order in stop-path.ts). */
  stopPath: StopPath<StopRequest | null>;
  /** What the stop sequence works on (stop-wiring.ts). */
  stopParticipants: StopParticipants;
  crashPoint: CrashPoint;
  /** How to start a successor: the CLI's argv for `keel gateway run`. */
  relaunch: Relaunch;
  now: () => number;
  /** Runs `fn` after `ms` (the held-back resumes); returns a cancel function. Default: setTimeout. */
  schedule?: (fn: () => void, ms: number) => () => void;
  /** Give the heap back after busy spells (lifecycle/memory-settle.ts). */
  settleMemory: boolean;
}

/** Thrown by start() when another gateway owns the home folder. */
export class AlreadyRunningError extends Error {}

export class Gateway {
  readonly store: Store;
  readonly runner: Runner;
  /** Tool calls waiting for a human (src/approvals). */
  readonly approvals: Approvals;
  /** The scheduled jobs (the agent's tool, `/schedules`; the CLI edits the store directly). */
  readonly schedules: ScheduleBook;
  /** The gateway's life; the CLI asks it for stops and waits on its exit code. */
  readonly lifecycle: Lifecycle;
  private readonly dispatcher: OutboxDispatcher;
  private readonly scheduler: Scheduler;
  private readonly platforms: PlatformRegistry;
  private readonly http: HttpServer;
  private readonly surface: GatewaySurface;
  private readonly cluster: Cluster | null;
  private readonly now: () => number;
  private readonly status$: RuntimeStatusWriter;
  private readonly stopPath: StopPath<StopRequest | null>;
  /** This process's start time as `gateway.pid` records it (what `keel gateway stop` names). */
  private processStartTime: number | null = null;
  /** Sessions the restart-loop breaker holds back until the breaker window has passed. */
  private heldBack = 0;
  private boundPort = 0;

  constructor(private readonly deps: GatewayParts) {
    const { core } = deps;
    this.now = deps.now;
    this.store = deps.store;
    this.lifecycle = deps.lifecycle;
    this.stopPath = deps.stopPath;
    this.status$ = core.statusWriter;
    this.dispatcher = core.dispatcher;
    this.approvals = core.approvals;
    this.runner = core.runner;
    this.scheduler = core.scheduler;
    this.schedules = core.schedules;
    this.http = core.http;
    this.platforms = core.platforms;
    this.surface = core.surface;
    this.cluster = core.cluster;
  }

  /** Resolves with the process exit code once a stop or restart has finished (or start failed). */
  get exited(): Promise<number> {
    return this.lifecycle.exited;
  }

  /** The HTTP port actually bound (differs from the config with port 0). */
  get port(): number {
    return this.boundPort;
  }

  /** Starts every part; throws AlreadyRunningError when another gateway owns the home folder. */
  async start(): Promise<void> {
    const { config, logger } = this.deps;
    const pid = await acquirePidFile(config.home, { argv: process.argv, now: this.now });
    if (!pid.ok) {
      this.lifecycle.fail();
      await this.store.close();
      throw new AlreadyRunningError(`${pid.message} Stop it with \`keel gateway stop\` first.`);
    }
    this.stopPath.arm("release pid file", () => pid.release());
    this.stopPath.arm("close store", () => this.store.close());
    this.processStartTime = pid.record.start_time;
    for (const fix of enforceHomeModes(config.home)) logger.warn(describeModeFix(fix));
    try {
      await this.startParts();
    } catch (err) {
      await this.status$.update({ gateway_state: "startup_failed", exit_reason: "startup_failed" });
      await this.stopPath.run(null, logger);
      await this.status$.close();
      this.lifecycle.fail();
      throw err;
    }
    // A stop asked for while starting runs now; later ones when they are asked for.
    void runStopPass({
      lifecycle: this.lifecycle,
      stopPath: this.stopPath,
      announce: () => this.surface.writeStatus(),
      config,
      logger,
      relaunch: this.deps.relaunch,
    });
  }

  private async startParts(): Promise<void> {
    const { config, logger } = this.deps;
    await this.status$.update({
      gateway_state: "starting",
      exit_reason: null,
      restart_requested: false,
      active_turns: 0,
    });
    this.stopPath.arm("close HTTP server", () => withTimeout(this.http.stop(), 500));
    this.boundPort = await this.http.start();
    await this.status$.update({
      http: { host: config.http.host, port: this.boundPort },
      drain_timeout_seconds: config.agent.restart_drain_timeout,
    });
    // Resumed turns must know which MCP tools are read-only: wait (bounded) for the servers.
    const mcp = this.deps.agent.mcp;
    if (mcp) {
      this.stopPath.arm("close MCP servers", () => mcp.close());
      mcp.start();
      await mcp.firstAttempts(10_000);
    }
    if (config.http.trust_loopback) {
      logger.warn(
        { setting: "http.trust_loopback" },
        "http.trust_loopback is on: any local process or user may use the agent and the control API without a credential",
      );
    }
    await this.recoverWork();
    // Messages arriving while we start are stored, and dispatched after the resumes below.
    this.runner.holdIntake();
    this.stopPath.arm(
      "end turns and disconnect platforms",
      stopSequenceStep(this.deps.stopParticipants, config, logger, () => homeChannels(config)),
    );
    for (const adapter of this.platforms.all()) {
      this.dispatcher.register(adapter);
      await adapter.start(this.deps.core.platformEvents.sinkFor(adapter.name, this.runner));
    }
    this.dispatcher.kick();
    const resumed = await this.resumeWork();
    this.stopPath.arm("stop tasks", () => this.deps.core.tasks.stop());
    await this.deps.core.tasks.start();
    // Budget pauses are answered like approvals: their period checks stop in the same step.
    const { budgets, senderLimits } = this.deps.core.budgetParts;
    this.stopPath.arm("stop approval deadlines", () => {
      this.approvals.stop();
      budgets.stop();
      senderLimits?.stop();
    });
    await this.approvals.start();
    await budgets.start();
    await this.greetAfterRestart(resumed.breakerTripped);
    this.lifecycle.moveTo("running");
    // A drain requested before this start (marker left in place) holds from the first moment.
    if ((await readDrainRequest(config.home)) !== null) this.surface.enterDrain();
    await this.surface.writeStatus();
    this.startWatchers();
    logger.info(
      { port: this.boundPort, host: config.http.host, resumed: resumed.resumed.length },
      "gateway running",
    );
  }

  /** Joins the cluster (if any) and closes what the previous process left running. */
  private async recoverWork(): Promise<void> {
    const { config, logger } = this.deps;
    const cluster = this.cluster;
    if (cluster) await cluster.joinCluster(cluster.membership);
    const clean = await consumeCleanShutdown(config.home);
    const report = await recoverInterruptedWork(this.store, {
      cleanShutdown: clean,
      now: this.now(),
      crashPoint: this.deps.crashPoint,
      ...(cluster && {
        leases: { owner: cluster.membership.instanceId, ttlMs: cluster.membership.leaseTtlMs },
      }),
    });
    if (report.interruptedTurns > 0 || report.markedSessions.length > 0)
      logger.warn({ ...report, clean }, "recovered interrupted work");
  }

  /** Expires stale tasks, resumes interrupted sessions, then dispatches what waits in the inbox. */
  private async resumeWork() {
    const { config, logger } = this.deps;
    // Tasks too old to continue end before anything resumes (tasks.max_age).
    const expired = await this.deps.core.tasks.expireStale();
    if (expired > 0) logger.warn({ expired }, "tasks expired after downtime");
    const resumed = await resumeInterruptedSessions({
      store: this.store,
      runner: this.runner,
      home: config.home,
      now: this.now(),
      freshnessMs: config.agent.auto_resume_freshness * 1000,
      breakerBoots: config.agent.resume_breaker_boots,
      breakerWindowMs: config.agent.resume_breaker_window * 1000,
      logger,
    });
    if (resumed.notices > 0) this.dispatcher.kick();
    if (resumed.held.length > 0) this.scheduleHeldResume(resumed.held);
    const cluster = this.cluster;
    // Several gateways: only this one's items and those of gateways that died (cluster.ts).
    await this.runner.dispatchOpenInbox(cluster ? () => cluster.inboxAtStart() : undefined);
    return resumed;
  }

  /**
   * The restart-loop breaker held these sessions back: they resume once this gateway has stayed
   * up for the breaker window. A crash before then leaves them resume-pending for the next start.
   */
  private scheduleHeldResume(keys: string[]): void {
    const { config, logger } = this.deps;
    this.heldBack = keys.length;
    const schedule =
      this.deps.schedule ??
      ((fn: () => void, ms: number) => {
        const timer = setTimeout(fn, ms);
        return () => clearTimeout(timer);
      });
    const cancel = schedule(() => {
      if (this.lifecycle.stopRequest() !== null) return;
      this.heldBack = 0;
      resumeHeldBack({ store: this.store, runner: this.runner, keys, logger }).catch(
        (err: unknown) => logger.error({ err }, "resuming held-back sessions failed"),
      );
    }, config.agent.resume_breaker_window * 1000);
    this.stopPath.arm("cancel held-back resumes", cancel);
  }

  private startWatchers(): void {
    const { config, logger } = this.deps;
    // Scheduled fires begin once the backlog is dispatched, and end when a stop begins.
    this.scheduler.start();
    const watchers: Watcher[] = [
      this.scheduler,
      startPlannedStopWatcher({
        home: config.home,
        self: { pid: process.pid, startTime: this.processStartTime },
        getPhase: () => this.lifecycle.state(),
        onPlannedStop: () => this.requestStop({ restart: false, signalInitiated: false }),
        logger,
      }),
      startDrainWatcher({
        home: config.home,
        getPhase: () => this.lifecycle.state(),
        enterDrain: () => this.surface.enterDrain(),
        leaveDrain: () => this.surface.leaveDrain(),
        logger,
      }),
      startStoreFailureWatcher({
        failure: () => this.store.failure(),
        onFailure: () =>
          this.requestStop({ restart: false, signalInitiated: true, storeFailed: true }),
        logger,
      }),
    ];
    // Retention and scheduled backups (retention.*, backup.every): small transactions, hourly.
    watchers.push(startDataJobs({ store: this.store, config, logger, now: this.now }));
    const alerts = this.createAlerts();
    if (alerts) {
      alerts.start();
      watchers.push(alerts);
    }
    if (this.deps.settleMemory) {
      watchers.push(
        startMemorySettle({ logger, isIdle: () => this.runner.activeTurns().length === 0 }),
      );
    }
    this.stopPath.arm("stop watchers", async () => {
      for (const watcher of watchers) await watcher.stop();
    });
  }

  /** `alerts.*`: conditions read from what the gateway keeps, off every turn's path. */
  private createAlerts(): GatewayAlerts | null {
    const { config, logger } = this.deps;
    return createGatewayAlerts({
      config,
      signals: {
        connections: () => this.platforms.connections(),
        modelFailing: () => this.deps.agent.models?.health.failingSince() ?? null,
        oldestUndelivered: async () => {
          const pending = await this.store.listPendingOutbox();
          return pending.length > 0 ? Math.min(...pending.map((item) => item.createdAt)) : null;
        },
        heldBack: () => this.heldBack,
        freeDiskShare: () => freeShareOf(config.home),
      },
      sendNotice: (address, text) => this.sendNotice(address, text),
      homeChannels: () => homeChannels(config),
      logger,
      now: this.now,
    });
  }

  /** Greets the chat that asked for `/restart`, or the home channels after another planned restart. */
  private async greetAfterRestart(breakerTripped: boolean): Promise<void> {
    const { config } = this.deps;
    const notify = await consumeRestartNotify(config.home);
    const pending = await consumeRestartPending(config.home);
    if (breakerTripped) return;
    if (notify) {
      await this.sendNotice(
        {
          platform: notify.platform,
          chatId: notify.chat_id,
          ...(notify.thread_id && { threadId: notify.thread_id }),
          ...(notify.message_id && { replyToMessageId: notify.message_id }),
        },
        RESTARTED_NOTICE,
      );
    } else if (pending) {
      for (const home of await homeChannels(this.deps.config))
        await this.sendNotice(home, ONLINE_NOTICE);
    }
  }

  /** Queues a notice to any chat through the outbox (durable, delivered in order). */
  private sendNotice(address: ChatAddress, text: string): Promise<void> {
    return this.deps.core.sendNotice(address, text);
  }

  /** Asks for a stop or restart (the lifecycle honours the first ask only). */
  requestStop(ask: StopAsk): { accepted: boolean } {
    return this.lifecycle.requestStop(ask);
  }

  /** Called once when a stop or restart is asked for, however it was asked for. */
  onStopRequested(listener: (request: StopRequest) => void): void {
    this.lifecycle.onStopRequested(listener);
  }

  // What the control API, the tests and the CLI ask of a gateway, answered from its lifecycle.
  status(): Promise<GatewayStatus> {
    return this.surface.status();
  }

  isReady(): boolean {
    return this.surface.isReady();
  }

  drain(action: "drain" | "cancel"): Promise<{ draining: boolean }> {
    return this.surface.drain(action);
  }

  restart(): Promise<{ accepted: boolean; message: string }> {
    return this.surface.restart();
  }

  stop(): Promise<{ accepted: boolean; message: string }> {
    return this.surface.stop();
  }
}

function withTimeout(promise: Promise<void>, ms: number): Promise<void> {
  return Promise.race([promise, new Promise<void>((resolve) => setTimeout(resolve, ms).unref())]);
}
