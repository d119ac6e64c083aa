/**
 * Builds the gateway's core from the parts the composition root chose: the runner, the outbox
 * dispatcher, approvals, the scheduler and its book, the HTTP server with its routes, the
 * platform adapters and the `gateway_state.json` writer, each hooked to the others. The `Gateway`
 * runs them; what they ask of its lifecycle (a `/restart`, activity the status feed shows, the
 * control API) goes through a {@link LifecycleLink}, since the gateway is built after them.
 */
import type { Logger } from "pino";
import { Approvals } from "../approvals/approvals.js";
import { createApprovalPolicy } from "../approvals/policy.js";
import { loadShellParser } from "../approvals/shell-syntax.js";
import type { Config } from "../config/schema.js";
import { Access } from "../control/access.js";
import { createApprovalRoutes } from "../control/approval-routes.js";
import { AuthFailures } from "../control/auth-failures.js";
import { createControlRoutes } from "../control/control-routes.js";
import type { ControlSurface } from "../control/control-surface.js";
import { createFileRoutes } from "../control/file-routes.js";
import { HttpServer } from "../control/http-server.js";
import { WebSessions } from "../control/web-session.js";
import type { CrashPoint } from "../lib/crash-point.js";
import type { LifecyclePhase } from "../lifecycle/lifecycle-phase.js";
import {
  createRuntimeStatusWriter,
  type RuntimeStatusWriter,
} from "../lifecycle/runtime-status.js";
import { PlatformRegistry } from "../platforms/kit/registry.js";
import type { ChatAddress, PlatformAdapter } from "../platforms/platform.js";
import { contextCommands, modelStatusLines } from "../runner/context-commands.js";
import { type DeliveryReport, OutboxDispatcher } from "../runner/outbox-dispatcher.js";
import { Runner } from "../runner/runner.js";
import { ScheduleBook } from "../schedules/book.js";
import { schedulesCommand } from "../schedules/chat-command.js";
import { Scheduler } from "../schedules/scheduler.js";
import { queueNotice } from "../sessions/notices.js";
import type { Store } from "../sessions/store.js";
import type { AgentParts } from "./agent-wiring.js";
import type { ClusterMembership } from "./cluster.js";
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

/** What the core asks of the gateway's lifecycle. */
export interface LifecycleCalls extends ControlSurface {
  notReadyReason(): string | null;
  storeDown(): boolean;
  /** A chat's `/restart`: the reply to give now, or null for none. */
  restartFromChat(address: ChatAddress, messageId: string): Promise<string | null>;
  onActiveTurnsChange(count: number): void;
  onPlatformStatusChange(): void;
  /** Something the status shows changed (a tool started or ended). */
  emitStatusChange(): void;
  lifecyclePhase(): LifecyclePhase;
}

/**
 * The core is built before the gateway that runs it, yet calls back into it: the core holds
 * `calls`, which forward to the gateway once `bind` was given it.
 */
export interface LifecycleLink {
  calls: LifecycleCalls;
  bind(target: LifecycleCalls): void;
}

export function createLifecycleLink(): LifecycleLink {
  let target: LifecycleCalls | null = null;
  const to = (): LifecycleCalls => {
    if (!target) throw new Error("the gateway's lifecycle was called before the gateway existed");
    return target;
  };
  return {
    bind(lifecycle) {
      target = lifecycle;
    },
    calls: {
      status: () => to().status(),
      isReady: () => to().isReady(),
      notReadyReason: () => to().notReadyReason(),
      storeDown: () => to().storeDown(),
      drain: (action) => to().drain(action),
      restart: () => to().restart(),
      stop: () => to().stop(),
      onStatusChange: (listener) => to().onStatusChange(listener),
      restartFromChat: (address, messageId) => to().restartFromChat(address, messageId),
      onActiveTurnsChange: (count) => to().onActiveTurnsChange(count),
      onPlatformStatusChange: () => to().onPlatformStatusChange(),
      emitStatusChange: () => to().emitStatusChange(),
      lifecyclePhase: () => to().lifecyclePhase(),
    },
  };
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
  /** Builds the platform adapters once the core they hook into exists. */
  adapters(wiring: AdapterWiring): PlatformAdapter[];
  lifecycle: LifecycleCalls;
  /** Told of every send the outbox makes (traces). */
  onDelivery?(report: DeliveryReport): void;
}

/** The parts the gateway runs. */
export interface GatewayCore {
  runner: Runner;
  approvals: Approvals;
  dispatcher: OutboxDispatcher;
  scheduler: Scheduler;
  schedules: ScheduleBook;
  http: HttpServer;
  /** The platform adapters, by name (platforms/kit/registry.ts). */
  platforms: PlatformRegistry;
  statusWriter: RuntimeStatusWriter;
  /** Queues a notice to any chat through the outbox (durable, delivered in order). */
  sendNotice(address: ChatAddress, text: string, approvalId?: string): Promise<void>;
}

export function createCore(input: CoreInput): GatewayCore {
  const { config, logger, store, agent, crashPoint, cluster, now, lifecycle } = input;
  const platforms = new PlatformRegistry();
  const statusWriter = createRuntimeStatusWriter({
    home: config.home,
    pid: process.pid,
    startTime: input.startedAt,
    logger,
    now,
  });
  const dispatcher = new OutboxDispatcher({
    ...(cluster && { chatLeases: { owner: cluster.instanceId, ttlMs: cluster.leaseTtlMs } }),
    store,
    logger: logger.child({ component: "outbox" }),
    crashPoint,
    ...(input.onDelivery && { onDelivery: input.onDelivery }),
  });
  const sendNotice = async (address: ChatAddress, text: string, approvalId?: string) => {
    await queueNotice(store, { address, text, ...(approvalId && { approvalId }) });
    dispatcher.kick();
  };
  const approvals = new Approvals({
    store,
    policy: createApprovalPolicy(config.tools),
    timeoutMs: config.tools.approval_timeout * 1000,
    notify: (address, text, approvalId) => sendNotice(address, text, approvalId),
    updateCard: (address, approvalId, text) =>
      platforms.approvalAnswered(address, approvalId, text),
    continueSession: (key, sessionId, requester, asker) =>
      runner.continueAfterApproval(key, sessionId, requester, asker),
    loadShell: loadShellParser,
    logger: logger.child({ component: "approvals" }),
    now,
  });
  // What the context chat commands (/usage, /model, /compact, /memory) need.
  const contextDeps = () => ({
    store,
    models: agent.models,
    home: config.home,
    prices: config.model.prices,
    busy: (key: string) => runner.activeTurns().some((t) => t.sessionKey === key),
  });
  const runner: Runner = new Runner({
    approvals,
    statusLines: () => agent.mcp?.statusLines() ?? [],
    store,
    agent: agent.agent,
    isReadOnlyTool: agent.isReadOnlyTool,
    busyInputMode: config.display.busy_input_mode,
    maxConcurrentTurns: config.agent.max_concurrent_turns,
    autoResumeFreshnessMs: config.agent.auto_resume_freshness * 1000,
    logger: logger.child({ component: "runner" }),
    control: {
      requestRestart: (from) => lifecycle.restartFromChat(from.address, from.messageId),
      setHomeChannel: (address) => setHomeChannel(config.home, address),
    },
    onReplyQueued: () => dispatcher.kick(),
    onActiveTurnsChange: (count) => lifecycle.onActiveTurnsChange(count),
    showTyping: (address) => platforms.showTyping(address),
    repliesInBand: (address) => platforms.repliesInBand(address),
    progress: (update) => platforms.progress(update),
    crashPoint,
    extraCommands: {
      schedules: (item, args) => schedulesCommand(schedules, item, args, now()),
      ...contextCommands(contextDeps()),
      approve: (item, args) => approvals.chatCommand(item, args, "approve"),
      deny: (item, args) => approvals.chatCommand(item, args, "deny"),
    },
    media: createMediaSettings(config, platforms),
    modelStatusLines: (item) => modelStatusLines(contextDeps(), item),
    ...(cluster && {
      sessionLeases: { owner: cluster.instanceId, ttlMs: cluster.leaseTtlMs },
    }),
    now,
  });
  const scheduler = new Scheduler({
    store,
    intake: (message, advance) => runner.receive(message, advance),
    notify: (address, text) => sendNotice(address, text),
    logger: logger.child({ component: "scheduler" }),
    now,
  });
  const schedules = new ScheduleBook(store, now, () => scheduler.kick());
  agent.bindSchedules?.(schedules);
  runner.onEvent((event) => {
    if (event.type === "tool_start" || event.type === "tool_end") lifecycle.emitStatusChange();
    if (event.type === "turn_end") {
      scheduler
        .onTurnEnd(event)
        .catch((err: unknown) => logger.error({ err }, "recording a scheduled run failed"));
    }
  });
  const access = new Access({
    controlToken: config.controlToken,
    apiKey: config.platforms.api.key,
    metricsToken: config.metrics.token,
    trustLoopback: config.http.trust_loopback,
    // Real time, not the injectable clock: security windows must not follow a test's clock.
    failures: new AuthFailures(),
    sessions: new WebSessions(config.controlToken, Date.now, config.http.session_ttl),
  });
  const http = new HttpServer({
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
    routes: [
      createControlRoutes({
        surface: lifecycle,
        store,
        sessionList: {
          runningKeys: () => runner.activeTurns().map((t) => t.sessionKey),
          pendingApprovals: () => store.listApprovals({ state: "pending" }),
          prices: config.model.prices,
        },
        onError: (err) => logger.error({ err }, "computing the live status failed"),
      }),
      createFileRoutes(store),
      createApprovalRoutes({
        list: (state) => store.listApprovals(state ? { state } : {}),
        get: (id) => store.getApproval(id),
        decide: (id, decision) => approvals.decideAsOperator(id, decision),
      }),
    ],
  });
  for (const adapter of input.adapters({
    store,
    http,
    access,
    onPlatformStatusChange: () => lifecycle.onPlatformStatusChange(),
  })) {
    platforms.add(adapter);
  }
  // Platforms that show turns live follow the runner's events; one failing never stops another.
  runner.onEvent((event) => {
    for (const adapter of platforms.all()) {
      try {
        adapter.onRunnerEvent?.(event);
      } catch (err) {
        logger.warn({ err, platform: adapter.name }, "platform event handler failed");
      }
    }
  });
  return {
    runner,
    approvals,
    dispatcher,
    scheduler,
    schedules,
    http,
    platforms,
    statusWriter,
    sendNotice,
  };
}
