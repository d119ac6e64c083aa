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
import { OpenAiApiAdapter } from "../platforms/openai-api/adapter.js";
import type { ChatAddress, PlatformAdapter } from "../platforms/platform.js";
import { TelegramAdapter } from "../platforms/telegram/adapter.js";
import { WebchatAdapter } from "../platforms/webchat/adapter.js";
import { webSocketToken } from "../platforms/webchat/upgrade-auth.js";
import { createWebRoutes } from "../control/web-routes.js";
import { isLoopbackPeer, secretsEqual } from "../control/http-auth.js";
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
  private readonly stopListeners: ((restart: boolean) => void)[] = [];
  private readonly startedAt: number;
  private readonly status$: RuntimeStatusWriter;
  private readonly stopGuard: StopGuard<number>;
  private phase: LifecyclePhase = "starting";
  private ready = false;
  private releasePid: (() => Promise<void>) | null = null;
  private boundPort = 0;
  /** Resolves with the process exit code once a stop or restart has finished. */
  readonly exited: Promise<number>;
  private resolveExit!: (code: number) => void;

  constructor(private readonly deps: GatewayDeps) {
    const { config, logger } = deps;
    this.now = deps.now ?? Date.now;
    this.startedAt = this.now();
    this.exited = new Promise((resolve) => (this.resolveExit = resolve));
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
    this.buildAdapters();
  }

  private buildAdapters(): void {
    const { config, logger } = this.deps;
    if (config.platforms.api.enabled) {
      const api = new OpenAiApiAdapter({
        apiKey: config.platforms.api.key,
        modelName: config.model.name,
        store: this.store,
        subscribe: (listener) => this.runner.onEvent(listener),
        logger: logger.child({ component: "api" }),
      });
      this.adapters.push(api);
      this.http.addRoutes(api.routes());
    }
    if (config.platforms.webchat.enabled) {
      const webchat = new WebchatAdapter({
        store: this.store,
        logger: logger.child({ component: "webchat" }),
        // Loopback clients need no token; others must present the control token.
        isAllowed: (req) => {
          if (isLoopbackPeer(req)) return true;
          const token = webSocketToken(req);
          return token !== null && secretsEqual(token, config.controlToken);
        },
      });
      this.runner.onEvent((event) => {
        const { sessionKey, sessionId } = event;
        if (event.type === "turn_end") webchat.publishTurnEvent({ sessionKey, sessionId, event: { type: "turn_end", stopReason: event.stopReason } });
        else if (event.type === "turn_start") webchat.publishTurnEvent({ sessionKey, sessionId, event: { type: "turn_start" } });
        else webchat.publishTurnEvent({ sessionKey, sessionId, event });
      });
      this.adapters.push(webchat);
      this.http.addUpgrade("/ws", (req, socket, head) => webchat.handleUpgrade(req, socket, head));
      this.http.addRoutes(createWebRoutes());
    }
    const telegram = config.platforms.telegram;
    if (config.telegramEnabled && telegram.token) {
      this.adapters.push(
        new TelegramAdapter({
          token: telegram.token,
          apiRoot: telegram.api_root,
          allowedUsers: telegram.allowed_users,
          groupSessionsPerUser: telegram.group_sessions_per_user,
          pairing: this.store,
          logger: logger.child({ component: "telegram" }),
        }),
      );
    }
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
    if (!pid.ok)
      throw new AlreadyRunningError(`${pid.message} Stop it with \`keel gateway stop\` first.`);
    this.releasePid = pid.release;
    try {
      await this.startParts();
    } catch (err) {
      await this.status$.update({ gateway_state: "startup_failed", exit_reason: "startup_failed" });
      await this.http.stop();
      for (const adapter of this.adapters) await adapter.stop().catch(() => {});
      await this.store.close();
      await pid.release();
      throw err;
    }
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
    if ((await readDrainRequest(config.home)) !== null) this.enterDrain();
    await this.writeStatus("running");
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
        self: { pid: process.pid, startTime: this.status$.current().start_time },
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
      for (const listener of this.stopListeners) listener(request.restart);
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
  onStopRequested(listener: (restart: boolean) => void): void {
    this.stopListeners.push(listener);
  }

  onStatusChange(listener: () => void): () => void {
    this.statusListeners.add(listener);
    return () => this.statusListeners.delete(listener);
  }
}
