/**
 * Builds the gateway's core from the parts the composition root chose: the runner, the outbox
 * dispatcher, approvals, the scheduler and its book, the HTTP server with its routes, the
 * platform adapters, the cluster membership and the `gateway_state.json` writer, each hooked to
 * the others. What they ask of the gateway's life (a `/restart`, the status feed, the control API)
 * they ask of the {@link Lifecycle} the composition root built first, through the
 * {@link GatewaySurface}; the `Gateway` engine then starts and stops them.
 */
import type { Logger } from "pino";
import { Approvals } from "../approvals/approvals.js";
import { createApprovalPolicy } from "../approvals/policy.js";
import type { Config } from "../config/schema.js";
import type { ChatAddress, PlatformAdapter } from "../contract/platform.js";
import { PlatformRegistry } from "../contract/registry.js";
import { Access } from "../control/access.js";
import { createApprovalRoutes } from "../control/approval-routes.js";
import { AuthFailures } from "../control/auth-failures.js";
import { createControlRoutes } from "../control/control-routes.js";
import { createFileRoutes } from "../control/file-routes.js";
import { HttpServer } from "../control/http-server.js";
import { WebSessions } from "../control/web-session.js";
import type { CrashPoint } from "../lib/crash-point.js";
import type { Lifecycle } from "../lifecycle/lifecycle.js";
import {
  createRuntimeStatusWriter,
  type RuntimeStatusWriter,
} from "../lifecycle/runtime-status.js";
import type { StopPath } from "../lifecycle/stop-path.js";
import type { StopRequest } from "../lifecycle/stop-sequence.js";
import { contextCommands, modelStatusLines } from "../runner/context-commands.js";
import { type DeliveryReport, OutboxDispatcher } from "../runner/outbox-dispatcher.js";
import { Runner } from "../runner/runner.js";
import { ScheduleBook } from "../schedules/book.js";
import { schedulesCommand } from "../schedules/chat-command.js";
import { jobSessionKey } from "../schedules/fire-message.js";
import { Scheduler } from "../schedules/scheduler.js";
import { queueNotice } from "../sessions/notices.js";
import type { Store } from "../sessions/store.js";
import { bgCommand, tasksCommand } from "../tasks/task-commands.js";
import { Tasks } from "../tasks/task-manager.js";
import type { AgentParts } from "./agent-wiring.js";
import {
  answerCommands,
  type BudgetParts,
  budgetRoutes,
  createBudgetParts,
  routedApprovals,
  usageWithBudgets,
} from "./budget-wiring.js";
import { Cluster, type ClusterMembership } from "./cluster.js";
import { PlatformEventClock } from "./event-clock.js";
import { GatewaySurface } from "./gateway-surface.js";
import { setHomeChannel } from "./home-channels.js";
import { createMediaSettings } from "./media-wiring.js";

/** What a platform adapter may be wired to when the composition root builds it. */
export interface AdapterWiring {
  store: Store;
  http: HttpServer;
  /** Who may connect (the HTTP routes' own rules, for a WebSocket upgrade). */
  access: Access;
  onPlatformStatusChange(): void;
}

export interface CoreInput {
  config: Config;
  logger: Logger;
  store: Store;
  agent: AgentParts;
  crashPoint: CrashPoint;
  cluster: ClusterMembership | null;
  now: () => number;
  /** When this gateway was built (`gateway_state.json`'s start time, the status's uptime). */
  startedAt: number;
  version: string;
  /** Builds the platform adapters once the core they hook into exists. */
  adapters(wiring: AdapterWiring): PlatformAdapter[];
  /** The gateway's life, built before every part. */
  lifecycle: Lifecycle;
  /** How the gateway closes (the cluster arms its step on it). */
  stopPath: StopPath<StopRequest | null>;
  /** Told of every send the outbox makes (traces). */
  onDelivery?(report: DeliveryReport): void;
}

/** The parts the gateway runs. */
export interface GatewayCore {
  runner: Runner;
  approvals: Approvals;
  /** Budgets (their pauses' deadlines start and stop with the gateway) and sender limits. */
  budgetParts: BudgetParts;
  dispatcher: OutboxDispatcher;
  scheduler: Scheduler;
  schedules: ScheduleBook;
  /** Subagents and background tasks (src/tasks). */
  tasks: Tasks;
  http: HttpServer;
  /** The platform adapters, by name (contract/registry.ts). */
  platforms: PlatformRegistry;
  statusWriter: RuntimeStatusWriter;
  /** The gateway's life as its parts and the control API see it. */
  surface: GatewaySurface;
  /** When each platform last handed over an event (the status shows it). */
  platformEvents: PlatformEventClock;
  /** Set when the store is shared by several gateways (Postgres): this one's membership. */
  cluster: Cluster | null;
  /** Queues a notice to any chat through the outbox (durable, delivered in order). */
  sendNotice(address: ChatAddress, text: string, approvalId?: string): Promise<void>;
}

export function createCore(input: CoreInput): GatewayCore {
  const { config, logger, store, agent, crashPoint, cluster: membership, now } = input;
  const platforms = new PlatformRegistry();
  const dispatcher = new OutboxDispatcher({
    ...(membership && {
      chatLeases: { owner: membership.instanceId, ttlMs: membership.leaseTtlMs },
    }),
    store,
    logger: logger.child({ component: "outbox" }),
    crashPoint,
    ...(input.onDelivery && { onDelivery: input.onDelivery }),
  });
  const sendNotice = async (address: ChatAddress, text: string, approvalId?: string) => {
    await queueNotice(store, { address, text, ...(approvalId && { approvalId }) });
    dispatcher.kick();
  };
  const approvals = createApprovals(input, {
    sendNotice,
    platforms,
    continueSession: (key, sessionId, requester, asker) =>
      runner.continueAfterApproval(key, sessionId, requester, asker),
  });
  const tasks = createTasks(input, {
    intake: (message) => runner.receive(message),
    stopSession: (key) => runner.stopSession(key),
    onNoticeQueued: () => dispatcher.kick(),
  });
  const budgetParts = createBudgetParts(input, {
    sendNotice,
    platforms,
    continueSession: (key, sessionId, requester) => {
      runner.continueAfterBudget(key, sessionId, requester);
      // A job held by the pause looks at its missed slots again (misfire policy).
      scheduler.kick();
    },
  });
  const runner: Runner = createRunner(input, {
    approvals,
    budgetParts,
    dispatcher,
    platforms,
    tasks,
    schedules: () => schedules,
    restartFromChat: (address, messageId) => surface.restartFromChat(address, messageId),
    onActiveTurnsChange: (count) => surface.onActiveTurnsChange(count),
  });
  const scheduler = createScheduler(input, {
    intake: (message, advance) => runner.receive(message, advance),
    notify: (address, text) => sendNotice(address, text),
  });
  const schedules = new ScheduleBook(store, now, () => scheduler.kick());
  agent.bindSchedules?.(schedules);
  followTurns(input, runner, { tasks, scheduler });
  const { statusWriter, cluster, platformEvents, surface } = createLifeParts(input, {
    runner,
    platforms,
  });
  const access = createAccess(config);
  const http = createHttpServer(
    config,
    logger,
    access,
    routes(input, runner, approvals, surface, budgetParts),
  );
  for (const adapter of input.adapters({
    store,
    http,
    access,
    onPlatformStatusChange: () => surface.onPlatformStatusChange(),
  })) {
    platforms.add(adapter);
  }
  forwardRunnerEvents(runner, platforms, logger);
  return {
    runner,
    approvals,
    budgetParts,
    dispatcher,
    scheduler,
    schedules,
    tasks,
    http,
    platforms,
    statusWriter,
    surface,
    platformEvents,
    cluster,
    sendNotice,
  };
}

/** What the runner's events move elsewhere: the status file, tasks and scheduled runs. */
function followTurns(
  { lifecycle, logger }: CoreInput,
  runner: Runner,
  { tasks, scheduler }: { tasks: Tasks; scheduler: Scheduler },
): void {
  runner.onEvent((event) => {
    if (event.type === "tool_start" || event.type === "tool_end") lifecycle.emitStatusChange();
    if (event.type === "turn_end") {
      tasks.onTurnEnd(event.sessionKey);
      scheduler
        .onTurnEnd(event)
        .catch((err: unknown) => logger.error({ err }, "recording a scheduled run failed"));
    }
  });
}

/** Tasks (subagents, /bg): their children's turns go through the runner like any message. */
function createTasks(
  { config, store, crashPoint, logger, now, agent }: CoreInput,
  hooks: Pick<ConstructorParameters<typeof Tasks>[0], "intake" | "stopSession" | "onNoticeQueued">,
): Tasks {
  const tasks = new Tasks({
    ...hooks,
    store,
    crashPoint,
    limits: {
      maxAgeMs: config.tasks.max_age * 1000,
      maxDepth: config.tasks.max_depth,
      maxConcurrent: config.tasks.max_concurrent,
      timeoutMs: config.tasks.timeout * 1000,
    },
    logger: logger.child({ component: "tasks" }),
    now,
  });
  agent.bindTasks?.(tasks);
  return tasks;
}

/** Scheduled jobs; a job whose last run waits for a budget's answer fires no more meanwhile. */
function createScheduler(
  { store, logger, now }: CoreInput,
  hooks: Pick<ConstructorParameters<typeof Scheduler>[0], "intake" | "notify">,
): Scheduler {
  return new Scheduler({
    ...hooks,
    store,
    held: async (name) => {
      const sessionKey = jobSessionKey(name);
      return (await store.listBudgetPauses({ state: "pending", sessionKey })).length > 0;
    },
    logger: logger.child({ component: "scheduler" }),
    now,
  });
}

/** Approvals, whose questions and answers go out as notices and cards on the platforms. */
function createApprovals(
  input: CoreInput,
  parts: {
    sendNotice: GatewayCore["sendNotice"];
    platforms: PlatformRegistry;
    continueSession: ConstructorParameters<typeof Approvals>[0]["continueSession"];
  },
): Approvals {
  const { config, logger, store, now } = input;
  return new Approvals({
    store,
    policy: createApprovalPolicy(config.tools),
    timeoutMs: config.tools.approval_timeout * 1000,
    notify: (address, text, approvalId) => parts.sendNotice(address, text, approvalId),
    updateCard: (address, approvalId, text) =>
      parts.platforms.approvalAnswered(address, approvalId, text),
    continueSession: parts.continueSession,
    // With the grammar, its WebAssembly runtime's JavaScript loads at the first command too.
    loadShell: async () => (await import("../approvals/shell-syntax.js")).loadShellParser(),
    logger: logger.child({ component: "approvals" }),
    now,
  });
}

/** The runner, hooked to the parts it reports to and the lifecycle a chat's `/restart` asks. */
function createRunner(
  input: CoreInput,
  parts: {
    approvals: Approvals;
    budgetParts: BudgetParts;
    dispatcher: OutboxDispatcher;
    platforms: PlatformRegistry;
    tasks: Tasks;
    schedules(): ScheduleBook;
    restartFromChat(address: ChatAddress, messageId: string): Promise<string | null>;
    onActiveTurnsChange(count: number): void;
  },
): Runner {
  const { config, logger, store, agent, crashPoint, now, cluster: membership } = input;
  const { platforms } = parts;
  const { budgets, senderLimits } = parts.budgetParts;
  // What the context chat commands (/usage, /model, /compact, /memory) need.
  const contextDeps = () => ({
    store,
    models: agent.models,
    home: config.home,
    prices: config.model.prices,
    busy: (key: string) => runner.activeTurns().some((t) => t.sessionKey === key),
  });
  const taskDeps = { tasks: parts.tasks, store, now };
  const context = contextCommands(contextDeps());
  const runner: Runner = new Runner({
    approvals: routedApprovals(parts.approvals, budgets),
    ...(config.budgets.length > 0 && { budgets }),
    ...(senderLimits && { senderLimits }),
    statusLines: () => agent.mcp?.statusLines() ?? [],
    store,
    agent: agent.agent,
    isReadOnlyTool: agent.isReadOnlyTool,
    busyInputMode: config.display.busy_input_mode,
    maxConcurrentTurns: config.agent.max_concurrent_turns,
    autoResumeFreshnessMs: config.agent.auto_resume_freshness * 1000,
    logger: logger.child({ component: "runner" }),
    control: {
      requestRestart: (from) => parts.restartFromChat(from.address, from.messageId),
      setHomeChannel: (address) => setHomeChannel(config.home, address),
    },
    onReplyQueued: () => parts.dispatcher.kick(),
    onActiveTurnsChange: parts.onActiveTurnsChange,
    showTyping: (address) => platforms.showTyping(address),
    repliesInBand: (address) => platforms.repliesInBand(address),
    progress: (update) => platforms.progress(update),
    crashPoint,
    extraCommands: {
      schedules: (item, args) => schedulesCommand(parts.schedules(), item, args, now()),
      ...context,
      ...(context.usage && { usage: usageWithBudgets(context.usage, input, budgets) }),
      ...answerCommands(parts.approvals, budgets, store),
      bg: (item, args) => bgCommand(taskDeps, item, args),
      tasks: (item, args) => tasksCommand(taskDeps, item, args),
    },
    tasks: parts.tasks,
    media: createMediaSettings(config, platforms),
    modelStatusLines: (item) => modelStatusLines(contextDeps(), item),
    ...(membership && {
      sessionLeases: { owner: membership.instanceId, ttlMs: membership.leaseTtlMs },
    }),
    now,
  });
  return runner;
}

/**
 * The `gateway_state.json` writer, the cluster membership (shared store only) and the surface:
 * what shows and reads the gateway's life.
 */
function createLifeParts(
  input: CoreInput,
  parts: { runner: Runner; platforms: PlatformRegistry },
): Pick<GatewayCore, "statusWriter" | "cluster" | "platformEvents" | "surface"> {
  const { config, logger, store, agent, now, lifecycle, cluster: membership } = input;
  const { runner, platforms } = parts;
  const statusWriter = createRuntimeStatusWriter({
    home: config.home,
    pid: process.pid,
    startTime: input.startedAt,
    logger,
    now,
  });
  const cluster =
    membership &&
    new Cluster({
      logger,
      cluster: membership,
      home: config.home,
      store,
      runner,
      stopPath: input.stopPath,
      now,
      startedAt: input.startedAt,
      phase: () => lifecycle.state(),
      onChange: () => lifecycle.emitStatusChange(),
      platforms: () => platforms.all().map((adapter) => adapter.name),
    });
  if (cluster) runner.onStoreBack(() => cluster.takeOverSoon());
  const platformEvents = new PlatformEventClock(now);
  const surface = new GatewaySurface({
    lifecycle,
    home: config.home,
    store,
    runner,
    platforms,
    statusWriter,
    platformEvents,
    cluster,
    mcp: agent.mcp,
    sandbox: agent.sandbox,
    version: input.version,
    startedAt: input.startedAt,
    now,
    logger,
  });
  return { statusWriter, cluster, platformEvents, surface };
}

/** The control API, file and approval routes. */
function routes(
  input: CoreInput,
  runner: Runner,
  approvals: Approvals,
  surface: GatewaySurface,
  budgetParts: BudgetParts,
): ConstructorParameters<typeof HttpServer>[0]["routes"] {
  const { config, logger, store } = input;
  return [
    createControlRoutes({
      surface,
      store,
      sessionList: {
        runningKeys: () => runner.activeTurns().map((t) => t.sessionKey),
        pendingApprovals: () => store.listApprovals({ state: "pending" }),
        prices: config.model.prices,
      },
      onError: (err) => logger.error({ err }, "computing the live status failed"),
    }),
    createFileRoutes(store),
    // Before the approval routes: a budget pause's answer is taken here, any other goes on.
    budgetRoutes(input, budgetParts.budgets),
    createApprovalRoutes({
      list: (state) => store.listApprovals(state ? { state } : {}),
      get: (id) => store.getApproval(id),
      decide: (id, decision) => approvals.decideAsOperator(id, decision),
    }),
  ];
}

/** Platforms that show turns live follow the runner's events; one failing never stops another. */
function forwardRunnerEvents(runner: Runner, platforms: PlatformRegistry, logger: Logger): void {
  runner.onEvent((event) => {
    for (const adapter of platforms.all()) {
      try {
        adapter.onRunnerEvent?.(event);
      } catch (err) {
        logger.warn({ err, platform: adapter.name }, "platform event handler failed");
      }
    }
  });
}

function createAccess(config: Config): Access {
  return new Access({
    controlToken: config.controlToken,
    apiKey: config.platforms.api.key,
    metricsToken: config.metrics.token,
    trustLoopback: config.http.trust_loopback,
    // Real time, not the injectable clock: security windows must not follow a test's clock.
    failures: new AuthFailures(),
    sessions: new WebSessions(config.controlToken, Date.now, config.http.session_ttl),
  });
}

function createHttpServer(
  config: Config,
  logger: Logger,
  access: Access,
  routes: ConstructorParameters<typeof HttpServer>[0]["routes"],
): HttpServer {
  return new HttpServer({
    host: config.http.host,
    port: config.http.port,
    publicHosts: config.http.public_hosts,
    access,
    maxBodyBytes: config.http.max_body_bytes,
    limits: {
      headersTimeoutMs: Math.round(config.http.headers_timeout * 1000),
      requestTimeoutMs: Math.round(config.http.request_timeout * 1000),
      maxConnections: config.http.max_connections,
    },
    logger: logger.child({ component: "http" }),
    routes,
  });
}
