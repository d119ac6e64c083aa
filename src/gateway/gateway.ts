/**
 * The composition root: builds every part from the config and wires them together, then owns
 * the gateway's lifecycle (start, stop, restart, drain). Nothing else imports across folders.
 */
import { join } from "node:path";
import type { Logger } from "pino";
import type { Config } from "../config/schema.js";
import { createControlRoutes } from "../control/control-routes.js";
import type { ControlSurface, GatewayStatus } from "../control/control-surface.js";
import { HttpServer } from "../control/http-server.js";
import type { CrashPoint } from "../lib/crash-point.js";
import type { ChatAddress, PlatformAdapter } from "../platforms/platform.js";
import type { AgentRun, IsReadOnlyTool } from "../runner/agent-run.js";
import { ONLINE_NOTICE, RESTARTED_NOTICE, restartCommandReply } from "../runner/lifecycle-texts.js";
import { OutboxDispatcher } from "../runner/outbox-dispatcher.js";
import { Runner } from "../runner/runner.js";
import { SqliteStore } from "../sessions/sqlite-store.js";
import type { Store } from "../sessions/store.js";
import { startDrainWatcher } from "./drain-watcher.js";
import type { Supervisor } from "./exit-code.js";
import { listHomeChannels, setHomeChannel } from "./home-channels.js";
import type { LifecyclePhase, Watcher } from "./lifecycle-phase.js";
import {
  consumeCleanShutdown,
  consumeRestartNotify,
  consumeRestartPending,
  readDrainRequest,
  removeDrainRequest,
  writeDrainRequest,
  writeRestartNotify,
} from "./markers.js";
import { acquirePidFile } from "./pid-file.js";
import { startPlannedStopWatcher } from "./planned-stop-watcher.js";
import { createPlatformAdapters } from "./platform-wiring.js";
import { recoverInterruptedWork } from "./recovery.js";
import { createRuntimeStatusWriter, type RuntimeStatusWriter } from "./runtime-status.js";
import { runShutdown, type ShutdownHooks } from "./shutdown.js";
import { resumeInterruptedSessions } from "./startup-resume.js";
import { createStopGuard, type StopGuard, type StopRequest } from "./stop-sequence.js";

export interface AgentParts {
  agent: AgentRun | null;
  isReadOnlyTool: IsReadOnlyTool;
  /** Kills every live tool process group; returns how many were signalled. */
  killToolProcesses(): number;
}

export interface GatewayDeps {
  config: Config;
  logger: Logger;
  agent: AgentParts;
  crashPoint: CrashPoint;
  version: string;
  /** The supervisor this process runs under (decides how a restart happens). */
  supervisor: Supervisor;
  /** How to start a successor: the CLI's argv for `keel gateway run`. */
  relaunch: ShutdownHooks["relaunch"];
  /** Platforms beyond those the config enables (an embedder's own, or a test platform). */
  extraAdapters?: PlatformAdapter[];
  now?: () => number;
}

/** Thrown by start() when another gateway owns the home folder. */
export class AlreadyRunningError extends Error {}

export class Gateway implements ControlSurface {
  readonly store: Store;
  readonly runner: Runner;
  private readonly dispatcher: OutboxDispatcher;
  private readonly adapters: PlatformAdapter[] = [];
  private readonly http: HttpServer;
  private readonly now: () => number;
  private readonly statusListeners = new Set<() => void>();
  private readonly watchers: Watcher[] = [];
  private readonly stopListeners: ((request: StopRequest) => void)[] = [];
  /** Settles when start() has finished: true when the gateway came up. */
  private readonly startSettled: Promise<boolean>;
  private settleStart!: (ok: boolean) => void;
  private readonly startedAt: number;
  private readonly status$: RuntimeStatusWriter;
  private readonly stopGuard: StopGuard<number>;
  private phase: LifecyclePhase = "starting";
  private ready = false;
  private releasePid: (() => Promise<void>) | null = null;
  /** This process's start time as `gateway.pid` records it (what `keel gateway stop` names). */
  private processStartTime: number | null = null;
  private boundPort = 0;
  /** Resolves with the process exit code once a stop or restart has finished. */
  readonly exited: Promise<number>;
  private resolveExit!: (code: number) => void;

  constructor(private readonly deps: GatewayDeps) {
    const { config, logger } = deps;
    this.now = deps.now ?? Date.now;
    this.startedAt = this.now();
    this.exited = new Promise((resolve) => (this.resolveExit = resolve));
    this.startSettled = new Promise((resolve) => (this.settleStart = resolve));
    this.store = new SqliteStore(join(config.home, "state.db"), { now: this.now });
    this.status$ = createRuntimeStatusWriter({
      home: config.home,
      pid: process.pid,
      startTime: this.startedAt,
      logger,
      now: this.now,
    });
    this.dispatcher = new OutboxDispatcher({
      store: this.store,
      logger: logger.child({ component: "outbox" }),
      crashPoint: deps.crashPoint,
    });
    this.runner = new Runner({
      store: this.store,
      agent: deps.agent.agent,
      isReadOnlyTool: deps.agent.isReadOnlyTool,
      busyInputMode: config.display.busy_input_mode,
      maxConcurrentTurns: config.agent.max_concurrent_turns,
      autoResumeFreshnessMs: config.agent.auto_resume_freshness * 1000,
      logger: logger.child({ component: "runner" }),
      control: {
        requestRestart: (from) => this.restartFromChat(from.address, from.messageId),
        setHomeChannel: (address) => setHomeChannel(config.home, address),
      },
      onReplyQueued: () => this.dispatcher.kick(),
      onActiveTurnsChange: (count) => this.onActivityChange(count),
      showTyping: (address) =>
        this.adapterFor(address.platform)?.showTyping?.(address) ?? (() => {}),
      crashPoint: deps.crashPoint,
      now: this.now,
    });
    this.runner.onEvent((event) => {
      if (event.type === "tool_start" || event.type === "tool_end") this.emitStatusChange();
    });
    this.stopGuard = createStopGuard((request) => this.runStop(request));
    this.http = new HttpServer({
      host: config.http.host,
      port: config.http.port,
      maxBodyBytes: config.http.max_body_bytes,
      logger: logger.child({ component: "http" }),
      routes: [
        createControlRoutes({
          surface: this,
          store: this.store,
          controlToken: config.controlToken,
        }),
      ],
    });
    this.adapters.push(
      ...(deps.extraAdapters ?? []),
      ...createPlatformAdapters({
        config,
        logger,
        store: this.store,
        runner: this.runner,
        http: this.http,
        onPlatformStatusChange: () => this.onPlatformStatusChange(),
      }),
    );
  }

  /** The HTTP port actually bound (differs from the config with port 0). */
  get port(): number {
    return this.boundPort;
  }

  private adapterFor(platform: string): PlatformAdapter | undefined {
    return this.adapters.find((a) => a.name === platform);
  }

  /** Starts every part; throws AlreadyRunningError when another gateway owns the home folder. */
  async start(): Promise<void> {
    const { config } = this.deps;
    const pid = await acquirePidFile(config.home, { argv: process.argv, now: this.now });
    if (!pid.ok) {
      this.settleStart(false);
      await this.store.close();
      throw new AlreadyRunningError(`${pid.message} Stop it with \`keel gateway stop\` first.`);
    }
    this.releasePid = pid.release;
    this.processStartTime = pid.record.start_time;
    try {
      await this.startParts();
    } catch (err) {
      await this.status$.update({ gateway_state: "startup_failed", exit_reason: "startup_failed" });
      await this.http.stop();
      for (const adapter of this.adapters) await adapter.stop().catch(() => {});
      await this.store.close();
      await pid.release();
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
    this.boundPort = await this.http.start();
    const clean = await consumeCleanShutdown(config.home);
    const report = await recoverInterruptedWork(this.store, {
      cleanShutdown: clean,
      now: this.now(),
      crashPoint: this.deps.crashPoint,
    });
    if (report.interruptedTurns > 0 || report.markedSessions.length > 0)
      logger.warn({ ...report, clean }, "recovered interrupted work");
    // Messages arriving while we start are stored, and dispatched after the resumes below.
    this.runner.holdIntake();
    for (const adapter of this.adapters) {
      this.dispatcher.register(adapter);
      await adapter.start(this.runner);
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
    await this.runner.dispatchOpenInbox();
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

  private startWatchers(): void {
    const { config, logger } = this.deps;
    this.watchers.push(
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
    );
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
    });
  }

  /** Queues a notice to any chat through the outbox (durable, delivered in order). */
  private async sendNotice(address: ChatAddress, text: string): Promise<void> {
    const key = `system:notices:${address.platform}:${address.chatId}`;
    const session = await this.store.ensureSession(key, address);
    await this.store.enqueueOutbox({
      sessionKey: key,
      sessionId: session.sessionId,
      address,
      text,
      kind: "notice",
    });
    this.dispatcher.kick();
  }

  /** Starts a stop or restart once; later requests change nothing and report it. */
  requestStop(input: {
    restart: boolean;
    signalInitiated: boolean;
    restartCommand?: ChatAddress | null;
  }): { accepted: boolean } {
    const request: StopRequest = {
      restart: input.restart,
      signalInitiated: input.signalInitiated,
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

  private async restartFromChat(address: ChatAddress, messageId: string): Promise<string | null> {
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
    this.phase = "stopping";
    this.ready = false;
    await this.writeStatus("draining", { restart_requested: request.restart });
    for (const watcher of this.watchers.splice(0)) await watcher.stop();
    return runShutdown(request, {
      config: this.deps.config,
      logger: this.deps.logger,
      store: this.store,
      runner: this.runner,
      dispatcher: this.dispatcher,
      adapters: this.adapters,
      killToolProcesses: () => this.deps.agent.killToolProcesses(),
      homeChannels: () => this.homeChannels(),
      statusWriter: this.status$,
      supervisor: this.deps.supervisor,
      relaunch: this.deps.relaunch,
      closeHttp: () => this.http.stop(),
      releasePid: () => this.releasePid?.() ?? Promise.resolve(),
      now: this.now,
      onStopped: () => {
        this.phase = "stopped";
        this.emitStatusChange();
      },
    });
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
  private onPlatformStatusChange(): void {
    if (this.phase === "stopped") return;
    void this.status$.update({ platforms: this.platformStates() });
    this.emitStatusChange();
  }

  private onActivityChange(count: number): void {
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
    return Object.fromEntries(this.adapters.map((a) => [a.name, a.status()]));
  }

  private emitStatusChange(): void {
    for (const listener of this.statusListeners) listener();
  }

  async status(): Promise<GatewayStatus> {
    const now = this.now();
    const turns = this.runner.activeTurns();
    const sessions = await this.store.listSessions({ limit: 100_000 });
    const platforms = this.platformStates();
    void this.status$.update({ platforms });
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
      turns: turns.map((t) => ({
        session_key: t.sessionKey,
        session_id: t.sessionId,
        started_at: new Date(t.startedAt).toISOString(),
        current_tool: t.currentTool,
      })),
      sessions: {
        total: sessions.length,
        resume_pending: sessions.filter((s) => s.resumePending).length,
      },
    };
  }

  isReady(): boolean {
    return this.ready && this.phase === "running";
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
