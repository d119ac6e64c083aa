/**
 * The gateway's lifecycle state machine (start, stop, restart, drain, status) over the parts the
 * composition root (`create-gateway.ts`) built and hooked together (`core-wiring.ts`): it starts
 * them in order, arms each one's step of the stop path as it comes up, and runs that path once.
 */
import type { Logger } from "pino";
import { createGatewayAlerts, type GatewayAlerts } from "../alerts/gateway-alerts.js";
import { freeShareOf } from "../alerts/gateway-conditions.js";
import type { Approvals } from "../approvals/approvals.js";
import type { Config } from "../config/schema.js";
import type { GatewayStatus } from "../control/control-surface.js";
import type { HttpServer } from "../control/http-server.js";
import type { CrashPoint } from "../lib/crash-point.js";
import { startDrainWatcher } from "../lifecycle/drain-watcher.js";
import type { Supervisor } from "../lifecycle/exit-code.js";
import { describeModeFix, enforceHomeModes } from "../lifecycle/home-modes.js";
import type { LifecyclePhase, Watcher } from "../lifecycle/lifecycle-phase.js";
import {
  consumeCleanShutdown,
  consumeRestartNotify,
  consumeRestartPending,
  readDrainRequest,
  removeDrainRequest,
  writeDrainRequest,
  writeRestartNotify,
} from "../lifecycle/markers.js";
import { startMemorySettle } from "../lifecycle/memory-settle.js";
import { acquirePidFile } from "../lifecycle/pid-file.js";
import { startPlannedStopWatcher } from "../lifecycle/planned-stop-watcher.js";
import type { RuntimeStatusWriter } from "../lifecycle/runtime-status.js";
import {
  disconnectPlatforms,
  endTurnsAndPlatforms,
  finishStop,
  type Relaunch,
  type StoppingGateway,
} from "../lifecycle/shutdown.js";
import type { StopPath } from "../lifecycle/stop-path.js";
import {
  createStopGuard,
  type StopGuard,
  type StopRequest,
  type StopSummary,
} from "../lifecycle/stop-sequence.js";
import { startStoreFailureWatcher } from "../lifecycle/store-failure-watcher.js";
import type { PlatformRegistry } from "../platforms/kit/registry.js";
import type { ChatAddress } from "../platforms/platform.js";
import { recoverInterruptedWork } from "../recovery/recovery.js";
import { resumeHeldBack, resumeInterruptedSessions } from "../recovery/startup-resume.js";
import { ONLINE_NOTICE, RESTARTED_NOTICE, restartCommandReply } from "../runner/lifecycle-texts.js";
import type { OutboxDispatcher } from "../runner/outbox-dispatcher.js";
import type { Runner } from "../runner/runner.js";
import type { ScheduleBook } from "../schedules/book.js";
import type { Scheduler } from "../schedules/scheduler.js";
import type { Store } from "../sessions/store.js";
import type { AgentParts } from "./agent-wiring.js";
import type { Cluster } from "./cluster.js";
import type { GatewayCore, LifecycleCalls } from "./core-wiring.js";
import { PlatformEventClock } from "./event-clock.js";
import { listHomeChannels } from "./home-channels.js";
import { platformRows } from "./platform-rows.js";

/** The parts the composition root built, and the seams of this gateway's surroundings. */
export interface GatewayParts {
  config: Config;
  logger: Logger;
  store: Store;
  agent: AgentParts;
  /** The runner, outbox, approvals, scheduler, HTTP server and adapters (core-wiring.ts). */
  core: GatewayCore;
  /** How this gateway closes: each part arms its step as it starts (order in stop-path.ts). */
  stopPath: StopPath<StopRequest | null>;
  crashPoint: CrashPoint;
  version: string;
  /** The supervisor this process runs under (decides how a restart happens). */
  supervisor: Supervisor;
  /** How to start a successor: the CLI's argv for `keel gateway run`. */
  relaunch: Relaunch;
  now: () => number;
  /** When the gateway was built (status uptime, `gateway_state.json`). */
  startedAt: number;
  /** Runs `fn` after `ms` (the held-back resumes); returns a cancel function. Default: setTimeout. */
  schedule?: (fn: () => void, ms: number) => () => void;
  /** Set when the store is shared by several gateways (Postgres): this one's membership. */
  cluster: Cluster | null;
  /** Give the heap back after busy spells (lifecycle/memory-settle.ts). */
  settleMemory: boolean;
}

/** Thrown by start() when another gateway owns the home folder. */
export class AlreadyRunningError extends Error {}

export class Gateway implements LifecycleCalls {
  readonly store: Store;
  readonly runner: Runner;
  /** Tool calls waiting for a human (src/approvals). */
  readonly approvals: Approvals;
  private readonly dispatcher: OutboxDispatcher;
  private readonly scheduler: Scheduler;
  /** The scheduled jobs (the agent's tool, `/schedules`; the CLI edits the store directly). */
  readonly schedules: ScheduleBook;
  private readonly platforms: PlatformRegistry;
  private readonly http: HttpServer;
  private readonly now: () => number;
  private readonly statusListeners = new Set<() => void>();
  private readonly platformEvents: PlatformEventClock;
  private readonly stopListeners: ((request: StopRequest) => void)[] = [];
  /** Settles when start() has finished: true when the gateway came up. */
  private readonly startSettled: Promise<boolean>;
  private settleStart!: (ok: boolean) => void;
  private readonly startedAt: number;
  private readonly status$: RuntimeStatusWriter;
  private readonly stopGuard: StopGuard<number>;
  private phase: LifecyclePhase = "starting";
  private ready = false;
  private readonly stopPath: StopPath<StopRequest | null>;
  /** What the stop sequence reported, once the stop path ran it. */
  private stopSummary: StopSummary | null = null;
  /** This process's start time as `gateway.pid` records it (what `keel gateway stop` names). */
  private processStartTime: number | null = null;
  /** Sessions the restart-loop breaker holds back until the breaker window has passed. */
  private heldBack = 0;
  private boundPort = 0;
  /** Resolves with the process exit code once a stop or restart has finished. */
  readonly exited: Promise<number>;
  private resolveExit!: (code: number) => void;

  constructor(private readonly deps: GatewayParts) {
    const { core } = deps;
    this.now = deps.now;
    this.platformEvents = new PlatformEventClock(deps.now);
    this.startedAt = deps.startedAt;
    this.exited = new Promise((resolve) => (this.resolveExit = resolve));
    this.startSettled = new Promise((resolve) => (this.settleStart = resolve));
    this.store = deps.store;
    this.stopPath = deps.stopPath;
    this.status$ = core.statusWriter;
    this.dispatcher = core.dispatcher;
    this.approvals = core.approvals;
    this.runner = core.runner;
    this.scheduler = core.scheduler;
    this.schedules = core.schedules;
    this.http = core.http;
    this.platforms = core.platforms;
    this.stopGuard = createStopGuard((request) => this.runStop(request));
  }

  /** Where the gateway is in its life. */
  lifecyclePhase(): LifecyclePhase {
    return this.phase;
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
      this.settleStart(false);
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
      this.settleStart(false);
      throw err;
    }
    this.settleStart(true);
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
    const cluster = this.deps.cluster;
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
    // Messages arriving while we start are stored, and dispatched after the resumes below.
    this.runner.holdIntake();
    this.stopPath.arm("end turns and disconnect platforms", async (request) => {
      if (!request) return disconnectPlatforms(this.stopping());
      this.stopSummary = await endTurnsAndPlatforms(
        request,
        this.stopping(),
        await this.homeChannels(),
      );
    });
    for (const adapter of this.platforms.all()) {
      this.dispatcher.register(adapter);
      await adapter.start(this.platformEvents.sinkFor(adapter.name, this.runner));
    }
    this.dispatcher.kick();
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
    // Several gateways: only this one's items and those of gateways that died (cluster.ts).
    await this.runner.dispatchOpenInbox(cluster ? () => cluster.inboxAtStart() : undefined);
    this.stopPath.arm("stop approval deadlines", () => this.approvals.stop());
    await this.approvals.start();
    await this.greetAfterRestart(resumed.breakerTripped);
    this.phase = "running";
    this.ready = true;
    // A drain requested before this start (marker left in place) holds from the first moment.
    const drained = (await readDrainRequest(config.home)) !== null;
    if (drained) this.enterDrain();
    await this.writeStatus(drained ? "draining" : "running");
    this.startWatchers();
    logger.info(
      { port: this.boundPort, host: config.http.host, resumed: resumed.resumed.length },
      "gateway running",
    );
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
      if (this.phase === "stopping" || this.phase === "stopped") return;
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
        getPhase: () => this.phase,
        onPlannedStop: () => void this.requestStop({ restart: false, signalInitiated: false }),
        logger,
      }),
      startDrainWatcher({
        home: config.home,
        getPhase: () => this.phase,
        enterDrain: () => this.enterDrain(),
        leaveDrain: () => this.leaveDrain(),
        logger,
      }),
      startStoreFailureWatcher({
        failure: () => this.store.failure(),
        onFailure: () =>
          void this.requestStop({ restart: false, signalInitiated: true, storeFailed: true }),
        logger,
      }),
    ];
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
      homeChannels: () => this.homeChannels(),
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
      for (const home of await this.homeChannels()) await this.sendNotice(home, ONLINE_NOTICE);
    }
  }

  private homeChannels(): Promise<ChatAddress[]> {
    return listHomeChannels(this.deps.config.home, {
      telegram: this.deps.config.platforms.telegram.home_channel,
      discord: this.deps.config.platforms.discord.home_channel,
      slack: this.deps.config.platforms.slack.home_channel,
    });
  }

  /** Queues a notice to any chat through the outbox (durable, delivered in order). */
  private sendNotice(address: ChatAddress, text: string): Promise<void> {
    return this.deps.core.sendNotice(address, text);
  }

  /** Starts a stop or restart once; later requests change nothing and report it. */
  requestStop(input: {
    restart: boolean;
    signalInitiated: boolean;
    storeFailed?: boolean;
    restartCommand?: ChatAddress | null;
  }): { accepted: boolean } {
    const request: StopRequest = {
      restart: input.restart,
      signalInitiated: input.signalInitiated,
      ...(input.storeFailed && { storeFailed: true }),
      restartCommand: input.restartCommand ?? null,
      viaService: this.deps.supervisor !== null,
      detached: this.deps.supervisor === null,
    };
    const { accepted, done } = this.stopGuard.request(request);
    if (accepted) {
      for (const listener of this.stopListeners) listener(request);
      done.then(
        (code) => this.resolveExit(code),
        (err: unknown) => {
          this.deps.logger.error({ err }, "stop failed");
          this.resolveExit(1);
        },
      );
    }
    return { accepted };
  }

  async restartFromChat(address: ChatAddress, messageId: string): Promise<string | null> {
    const already = this.stopGuard.current() !== null;
    const activeTurns = this.runner.activeTurns().filter((t) => t.agentStarted).length;
    if (!already) {
      await writeRestartNotify(this.deps.config.home, {
        platform: address.platform,
        chat_id: address.chatId,
        thread_id: address.threadId ?? null,
        message_id: messageId,
        requested_at: this.now(),
      });
      this.requestStop({
        restart: true,
        signalInitiated: false,
        restartCommand: { ...address, replyToMessageId: messageId },
      });
    }
    // An idle restart says nothing now: the chat hears "restarted" once the gateway is back.
    if (!already && activeTurns === 0) return null;
    return restartCommandReply({ alreadyRequested: already, activeTurns });
  }

  private async runStop(request: StopRequest): Promise<number> {
    // A stop asked for while starting waits for start-up to finish; a failed start already
    // closed everything.
    if (!(await this.startSettled)) return 1;
    const { logger } = this.deps;
    this.phase = "stopping";
    this.ready = false;
    await this.writeStatus("draining", { restart_requested: request.restart });
    logger.info(
      { restart: request.restart, signal: request.signalInitiated && !request.storeFailed },
      request.restart ? "restarting" : "stopping",
    );
    await this.stopPath.run(request, logger);
    const summary = this.stopSummary;
    if (!summary) throw new Error("the stop sequence did not finish");
    const code = await finishStop(request, summary, this.stopping(), this.deps.relaunch);
    this.phase = "stopped";
    this.emitStatusChange();
    return code;
  }

  /** The parts the stop sequence works on. */
  private stopping(): StoppingGateway {
    return {
      config: this.deps.config,
      logger: this.deps.logger,
      store: this.store,
      runner: this.runner,
      dispatcher: this.dispatcher,
      platforms: this.platforms,
      killToolProcesses: () => this.deps.agent.killToolProcesses(),
      statusWriter: this.status$,
      supervisor: this.deps.supervisor,
      now: this.now,
    };
  }

  private enterDrain(): void {
    if (this.phase !== "running") return;
    this.phase = "drained";
    this.runner.setDraining(true);
    this.deps.logger.info("external drain: not starting new turns");
    void this.writeStatus("draining");
  }

  private leaveDrain(): void {
    if (this.phase !== "drained") return;
    this.phase = "running";
    this.runner.setDraining(false);
    this.deps.logger.info("external drain cancelled");
    void this.writeStatus("running");
  }

  /** A platform's state changed in the background: `gateway_state.json` must show it. */
  onPlatformStatusChange(): void {
    if (this.phase === "stopped") return;
    void this.status$.update({ platforms: this.platformStates() });
    this.emitStatusChange();
  }

  onActiveTurnsChange(count: number): void {
    void this.status$.update({ active_turns: count });
    this.emitStatusChange();
  }

  private async writeStatus(
    state: "starting" | "running" | "draining",
    extra: { restart_requested?: boolean } = {},
  ): Promise<void> {
    await this.status$.update({
      gateway_state: state,
      active_turns: this.runner.activeTurns().length,
      platforms: this.platformStates(),
      ...extra,
    });
    this.emitStatusChange();
  }

  private platformStates(): Record<string, { state: string; error: string | null }> {
    return Object.fromEntries(this.platforms.all().map((a) => [a.name, a.status()]));
  }

  emitStatusChange(): void {
    for (const listener of this.statusListeners) listener();
  }

  async status(): Promise<GatewayStatus> {
    const now = this.now();
    const turns = this.runner.activeTurns();
    const sessions = await this.store.countSessions();
    const platforms = platformRows(
      this.platformStates(),
      this.platforms.connections(),
      (name) => this.platformEvents.lastEventAt(name),
      now,
    );
    return {
      gateway_state:
        this.phase === "drained" || this.phase === "stopping" ? "draining" : this.phase,
      pid: process.pid,
      started_at: new Date(this.startedAt).toISOString(),
      uptime_seconds: Math.round((now - this.startedAt) / 1000),
      version: this.deps.version,
      active_turns: turns.length,
      draining: this.phase === "drained",
      restart_requested: this.stopGuard.current()?.restart ?? false,
      platforms,
      sandbox: { mode: this.deps.agent.sandbox.mode, detail: this.deps.agent.sandbox.detail },
      ...(this.deps.agent.mcp && { mcp: this.deps.agent.mcp.status() }),
      turns: turns.map((t) => ({
        session_key: t.sessionKey,
        session_id: t.sessionId,
        started_at: new Date(t.startedAt).toISOString(),
        current_tool: t.currentTool,
      })),
      sessions: { total: sessions.total, resume_pending: sessions.resumePending },
      ...(this.deps.cluster && { instances: await this.deps.cluster.instances() }),
    };
  }

  isReady(): boolean {
    // Per instance: a gateway that cannot reach the shared store is not ready, the others may be.
    return (
      this.ready &&
      this.phase === "running" &&
      this.store.failure() === null &&
      (this.deps.cluster?.healthy() ?? true)
    );
  }

  /** Why `/readyz` says 503: the store first (it is what an operator must look at). */
  notReadyReason(): string | null {
    if (this.isReady()) return null;
    if (this.storeDown()) return "the store does not answer";
    if (this.phase !== "running") return `the gateway is ${this.phase}`;
    return "the gateway is starting";
  }

  /** The store failed for good (SQLite), or its heartbeat does not get through (Postgres). */
  storeDown(): boolean {
    return this.store.failure() !== null || !(this.deps.cluster?.healthy() ?? true);
  }

  async drain(action: "drain" | "cancel"): Promise<{ draining: boolean }> {
    const home = this.deps.config.home;
    if (action === "drain") {
      await writeDrainRequest(home, { requested_at: this.now(), via: "api" });
      this.enterDrain();
    } else {
      await removeDrainRequest(home);
      this.leaveDrain();
    }
    return { draining: this.phase === "drained" };
  }

  async restart(): Promise<{ accepted: boolean; message: string }> {
    const { accepted } = this.requestStop({ restart: true, signalInitiated: false });
    return {
      accepted,
      message: accepted ? "Restart started." : "A stop or restart is already under way.",
    };
  }

  async stop(): Promise<{ accepted: boolean; message: string }> {
    const { accepted } = this.requestStop({ restart: false, signalInitiated: false });
    return {
      accepted,
      message: accepted ? "Stop started." : "A stop or restart is already under way.",
    };
  }

  /** Called once when a stop or restart begins, however it was asked for. */
  onStopRequested(listener: (request: StopRequest) => void): void {
    this.stopListeners.push(listener);
  }

  onStatusChange(listener: () => void): () => void {
    this.statusListeners.add(listener);
    return () => this.statusListeners.delete(listener);
  }
}

function withTimeout(promise: Promise<void>, ms: number): Promise<void> {
  return Promise.race([promise, new Promise<void>((resolve) => setTimeout(resolve, ms).unref())]);
}
