/**
 * The composition root: the one place that chooses and builds the gateway's parts (store, agent
 * and its tools, platform adapters, crash points, the core the gateway runs) from the config, and
 * the `Gateway` engine over them. The {@link Lifecycle} is built first, so no part needs the
 * engine to exist before it. `keel gateway run`, `keel chat` and the tests each call
 * it; a new platform, tool set or store implementation is wired here or in a wiring module beside.
 */
import { randomBytes } from "node:crypto";
import { hostname } from "node:os";
import type { Logger } from "pino";
import type { Config } from "../config/schema.js";
import { storeTarget } from "../config/store-target.js";
import type { PlatformAdapter } from "../contract/platform.js";
import { createCrashPoint } from "../lib/crash-point.js";
import { KEEL_VERSION } from "../lib/version.js";
import type { Supervisor } from "../lifecycle/exit-code.js";
import { Lifecycle } from "../lifecycle/lifecycle.js";
import type { Relaunch } from "../lifecycle/shutdown.js";
import { StopPath } from "../lifecycle/stop-path.js";
import type { StopRequest } from "../lifecycle/stop-sequence.js";
import type { DeliveryReport } from "../runner/outbox-dispatcher.js";
import { openPostgresStore } from "../sessions/open-store.js";
import { SqliteStore } from "../sessions/sqlite-store.js";
import type { CommitObserver, Store } from "../sessions/store.js";
import type { FsyncFn } from "../sessions/wal-sync.js";
import { GatewayMetrics, type MetricsSources } from "../telemetry/gateway-metrics.js";
import { createMetricsRoute } from "../telemetry/metrics-route.js";
import { createTurnTracer, type TurnTracer } from "../telemetry/turn-tracer.js";
import { createAgentParts } from "./agent-wiring.js";
import type { ClusterMembership } from "./cluster.js";
import { createCore } from "./core-wiring.js";
import { Gateway } from "./gateway.js";
import { createPlatformAdapters } from "./platform-wiring.js";
import { createStopParticipants } from "./stop-wiring.js";

/** The seams a caller may set; everything else follows from the config. */
export interface GatewayOptions {
  logger: Logger;
  /** The supervisor this process runs under (decides how a restart happens). Default: none. */
  supervisor?: Supervisor;
  /**
   * How to start the successor of a restart outside a supervisor (`keel gateway run` passes its
   * own command line). Default: refuse, for gateways that must never spawn one (tests, `keel chat`).
   */
  relaunch?: Relaunch;
  /** Platforms beyond those the config enables (an embedder's own, or a test platform). */
  extraAdapters?: PlatformAdapter[];
  /** The clock (default Date.now). */
  now?: () => number;
  /** Runs `fn` after `ms` (the held-back resumes); returns a cancel function. Default: setTimeout. */
  schedule?: (fn: () => void, ms: number) => () => void;
  /**
   * Run full collections when the gateway goes quiet after a busy spell, to give the heap back
   * (default true). Off for a gateway sharing its process with other work, such as a test worker.
   */
  settleMemory?: boolean;
  /** How the SQLite store flushes its WAL (default `fs.fsync`; tests fail it). */
  sqliteFsync?: FsyncFn;
}

export function createGateway(config: Config, options: GatewayOptions): Gateway {
  const { logger } = options;
  const now = options.now ?? Date.now;
  const crashPoint = createCrashPoint(config.crashPoint);
  const membership = clusterMembership(config);
  // Built first: the store and the model chain report to it; it reads them back when scraped.
  let scrapeFrom: MetricsSources | null = null;
  const metrics = new GatewayMetrics(
    lateSources(() => scrapeFrom),
    () => core.platforms.all().map((adapter) => adapter.name),
  );
  const store = openStore(config, now, membership, options.sqliteFsync, (seconds) =>
    metrics.onStoreCommit(seconds),
  );
  const tracer = createTracer(config, now, logger, (key) => metrics.platformOf(key));
  const agent = createAgentParts(
    config,
    logger.child({ component: "agent" }),
    (attempt, session) => {
      metrics.onModelAttempt(attempt);
      tracer?.onModelAttempt(attempt, session);
    },
  );
  const startedAt = now();
  // The gateway's life first: every part below asks it directly, none waits for the engine.
  const lifecycle = new Lifecycle(options.supervisor ?? null, now);
  const stopPath = new StopPath<StopRequest | null>();
  const core = createCore({
    config,
    logger,
    store,
    agent,
    crashPoint,
    cluster: membership,
    now,
    startedAt,
    version: KEEL_VERSION,
    lifecycle,
    stopPath,
    ...(tracer && { onDelivery: (report: DeliveryReport) => tracer.onDelivery(report) }),
    adapters: (wiring) => [
      ...(options.extraAdapters ?? []),
      ...createPlatformAdapters({ config, logger, cluster: membership, ...wiring }),
    ],
  });
  scrapeFrom = {
    backlog: () => store.backlog(),
    connections: () => core.platforms.connections(),
    tasksRunning: () => 0,
    now,
  };
  core.runner.onEvent((event) => metrics.onRunnerEvent(event));
  if (tracer) {
    core.runner.onEvent((event) => tracer.onRunnerEvent(event));
    stopPath.arm("flush traces", () => tracer.shutdown());
  }
  core.http.addRoutes(createMetricsRoute(metrics));
  const stopParticipants = createStopParticipants({
    config,
    logger,
    store,
    lifecycle,
    core,
    killToolProcesses: () => agent.killToolProcesses(),
    now,
  });
  return new Gateway({
    config,
    logger,
    store,
    agent,
    core,
    lifecycle,
    stopPath,
    stopParticipants,
    crashPoint,
    now,
    relaunch: options.relaunch ?? refuseRelaunch,
    ...(options.schedule && { schedule: options.schedule }),
    settleMemory: options.settleMemory ?? true,
  });
}

/** Postgres when `store.url` is a postgres:// URL (gateways may share it), else SQLite in the home. */
function openStore(
  config: Config,
  now: () => number,
  cluster: ClusterMembership | null,
  fsync: FsyncFn | undefined,
  onCommit: CommitObserver,
): Store {
  const target = storeTarget(config);
  return target.kind === "postgres"
    ? openPostgresStore(target.url, {
        now,
        onCommit,
        ...(cluster && { instanceId: cluster.instanceId }),
      })
    : new SqliteStore(target.path, { now, onCommit, ...(fsync && { fsync }) });
}

/** Traces of turns when `telemetry.otlp_endpoint` is set; else null, and no SDK is loaded. */
function createTracer(
  config: Config,
  now: () => number,
  logger: Logger,
  platformOf: (sessionKey: string) => string,
): TurnTracer | null {
  const endpoint = config.telemetry.otlp_endpoint;
  if (!endpoint) return null;
  return createTurnTracer({ endpoint, version: KEEL_VERSION, now, platformOf }, (err) =>
    logger.error({ err }, "loading the OpenTelemetry SDK failed: no traces are sent"),
  );
}

/** The metrics' scrape-time sources, which exist only once the core is built. */
function lateSources(get: () => MetricsSources | null): MetricsSources {
  const sources = (): MetricsSources => {
    const s = get();
    if (!s) throw new Error("metrics were scraped before the gateway was built");
    return s;
  };
  return {
    backlog: () => sources().backlog(),
    connections: () => sources().connections(),
    tasksRunning: () => sources().tasksRunning(),
    now: () => sources().now(),
  };
}

/**
 * On a Postgres store several gateways may run at once: this one joins them under its id, and
 * runs each turn under the session's lease. SQLite has one gateway, and no leases.
 */
function clusterMembership(config: Config): ClusterMembership | null {
  if (storeTarget(config).kind !== "postgres") return null;
  return {
    instanceId:
      config.cluster.instance_id ??
      `${hostname()}-${process.pid}-${randomBytes(3).toString("hex")}`,
    leaseTtlMs: config.cluster.lease_ttl * 1000,
  };
}

function refuseRelaunch(): never {
  throw new Error("this gateway was built without a way to start a successor");
}
