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
import type { AgentRun, IsReadOnlyTool } from "../runner/agent-run.js";
import { OutboxDispatcher } from "../runner/outbox-dispatcher.js";
import { Runner } from "../runner/runner.js";
import { SqliteStore } from "../sessions/sqlite-store.js";
import type { Store } from "../sessions/store.js";
import { recoverInterruptedWork } from "./recovery.js";

export type GatewayState = GatewayStatus["gateway_state"];

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
  now?: () => number;
}

export class Gateway implements ControlSurface {
  readonly store: Store;
  readonly runner: Runner;
  private readonly dispatcher: OutboxDispatcher;
  private readonly adapters: PlatformAdapter[] = [];
  private readonly http: HttpServer;
  private readonly now: () => number;
  private readonly statusListeners = new Set<() => void>();
  private state: GatewayState = "starting";
  private readonly startedAt: number;
  private boundPort = 0;

  constructor(private readonly deps: GatewayDeps) {
    const { config, logger } = deps;
    this.now = deps.now ?? Date.now;
    this.startedAt = this.now();
    this.store = new SqliteStore(join(config.home, "state.db"), { now: this.now });
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
        requestRestart: async () => "Restart is not available yet.",
        setHomeChannel: async (address: ChatAddress) => {
          logger.info({ address }, "home channel set");
        },
      },
      onReplyQueued: () => this.dispatcher.kick(),
      showTyping: (address) =>
        this.adapterFor(address.platform)?.showTyping?.(address) ?? (() => {}),
      crashPoint: deps.crashPoint,
      now: this.now,
    });
    this.runner.onEvent(() => this.emitStatusChange());
    const routes = [
      createControlRoutes({ surface: this, store: this.store, controlToken: config.controlToken }),
    ];
    if (config.platforms.api.enabled) {
      const api = new OpenAiApiAdapter({
        apiKey: config.platforms.api.key,
        modelName: config.model.name,
        store: this.store,
        subscribe: (listener) => this.runner.onEvent(listener),
        logger: logger.child({ component: "api" }),
      });
      this.adapters.push(api);
      routes.push(api.routes());
    }
    this.http = new HttpServer({
      host: config.http.host,
      port: config.http.port,
      maxBodyBytes: config.http.max_body_bytes,
      logger: logger.child({ component: "http" }),
      routes,
    });
  }

  /** The HTTP port actually bound (differs from the config with port 0). */
  get port(): number {
    return this.boundPort;
  }

  private adapterFor(platform: string): PlatformAdapter | undefined {
    return this.adapters.find((a) => a.name === platform);
  }

  async start(): Promise<void> {
    const { logger } = this.deps;
    this.boundPort = await this.http.start();
    const report = await recoverInterruptedWork(this.store, {
      cleanShutdown: false,
      now: this.now(),
    });
    if (report.interruptedTurns > 0) logger.warn(report, "recovered interrupted work");
    for (const adapter of this.adapters) {
      this.dispatcher.register(adapter);
      await adapter.start(this.runner);
    }
    this.dispatcher.kick();
    for (const session of await this.store.listResumePending()) this.runner.resume(session);
    await this.runner.dispatchOpenInbox();
    this.setState("running");
    logger.info({ port: this.boundPort, host: this.deps.config.http.host }, "gateway running");
  }

  async stopGateway(): Promise<void> {
    this.runner.setAdmission("stopping");
    this.runner.interruptAll();
    this.deps.agent.killToolProcesses();
    await this.runner.waitForIdle(5000);
    this.dispatcher.stop();
    for (const adapter of [...this.adapters].reverse()) await adapter.stop();
    await this.http.stop();
    await this.store.close();
    this.setState("stopped");
  }

  private setState(state: GatewayState): void {
    this.state = state;
    this.emitStatusChange();
  }

  private emitStatusChange(): void {
    for (const listener of this.statusListeners) listener();
  }

  async status(): Promise<GatewayStatus> {
    const now = this.now();
    const turns = this.runner.activeTurns();
    const sessions = await this.store.listSessions({ limit: 10_000 });
    return {
      gateway_state: this.state,
      pid: process.pid,
      started_at: new Date(this.startedAt).toISOString(),
      uptime_seconds: Math.round((now - this.startedAt) / 1000),
      version: this.deps.version,
      active_turns: turns.length,
      draining: this.runner.isDraining(),
      restart_requested: false,
      platforms: Object.fromEntries(this.adapters.map((a) => [a.name, a.status()])),
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
    return this.state === "running" && !this.runner.isDraining();
  }

  async drain(action: "drain" | "cancel"): Promise<{ draining: boolean }> {
    this.runner.setDraining(action === "drain");
    this.emitStatusChange();
    return { draining: this.runner.isDraining() };
  }

  async restart(): Promise<{ accepted: boolean; message: string }> {
    return { accepted: false, message: "not yet" };
  }

  async stop(): Promise<{ accepted: boolean; message: string }> {
    return { accepted: false, message: "not yet" };
  }

  onStatusChange(listener: () => void): () => void {
    this.statusListeners.add(listener);
    return () => this.statusListeners.delete(listener);
  }
}
