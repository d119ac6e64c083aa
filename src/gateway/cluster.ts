/**
 * This gateway's part among the gateways sharing one store (Postgres): its row in `instances`
 * with a heartbeat, the takeover of turns whose gateway stopped renewing their leases (then the
 * removal of dead gateways' rows), and the instances the status lists, alive or dead. A gateway
 * that can prove this home's previous gateway is gone takes its leases over at once
 * (predecessor.ts). The composition root builds it only for a shared store.
 */
import { hostname } from "node:os";
import type { Logger } from "pino";
import type { GatewayStatus } from "../control/control-surface.js";
import type { GatewayState } from "../lifecycle/lifecycle.js";
import { isProcessAlive } from "../lifecycle/process-info.js";
import type { StopPath } from "../lifecycle/stop-path.js";
import type { StopRequest } from "../lifecycle/stop-sequence.js";
import { recoverInterruptedWork } from "../recovery/recovery.js";
import { resumeHeldBack } from "../recovery/startup-resume.js";
import type { Runner } from "../runner/runner.js";
import type {
  ClusterStore,
  InboxItem,
  InboxStore,
  OutboxStore,
  SessionStore,
  TurnStore,
} from "../sessions/store.js";
import {
  createInstanceWatch,
  describeInstances,
  forgetDeadInstances,
  type Heartbeat,
  startHeartbeat,
} from "./instance-registry.js";
import {
  currentIdentity,
  type InstanceIdentity,
  provenDead,
  readPredecessor,
  recordIdentity,
} from "./predecessor.js";

export interface ClusterMembership {
  instanceId: string;
  leaseTtlMs: number;
}

export interface ClusterParts {
  logger: Logger;
  cluster: ClusterMembership;
  /** This gateway's home: it records who runs there, for the next gateway to take over from. */
  home: string;
  store: ClusterStore & InboxStore & SessionStore & TurnStore & OutboxStore;
  runner: Runner;
  /** The gateway's stop path: leaving the cluster is one of its steps. */
  stopPath: StopPath<StopRequest | null>;
  now: () => number;
  /** When this gateway was built (its `instances` row's start). */
  startedAt: number;
  /** Where the gateway is in its life (the takeover sweep runs only while it runs). */
  phase: () => GatewayState;
  /** What the status shows of the gateways changed (one died or went): the status stream pushes. */
  onChange: () => void;
  /**
   * The platforms this gateway delivers to, recorded with its row: a reply it queues for a
   * platform it lacks is sent by a gateway that has it, not held for this one.
   */
  platforms: () => string[];
}

export class Cluster {
  private readonly store: ClusterStore & InboxStore & SessionStore & TurnStore & OutboxStore;
  private readonly runner: Runner;
  private readonly stopPath: StopPath<StopRequest | null>;
  private readonly now: () => number;
  private readonly startedAt: number;
  private heartbeat: Heartbeat | null = null;
  /** The takeover under way (the sweep's or an early one), so two never run at once. */
  private takingOver: Promise<void> | null = null;

  constructor(private readonly deps: ClusterParts) {
    this.store = deps.store;
    this.runner = deps.runner;
    this.stopPath = deps.stopPath;
    this.now = deps.now;
    this.startedAt = deps.startedAt;
  }

  get membership(): ClusterMembership {
    return this.deps.cluster;
  }

  private get phase(): GatewayState {
    return this.deps.phase();
  }

  /** False while this instance's heartbeat fails (the store does not answer): /readyz says 503. */
  healthy(): boolean {
    return this.heartbeat?.healthy() ?? true;
  }

  /**
   * Registers this instance in the shared store and keeps its heartbeat; a planned stop removes
   * it (after the turns ended), which frees its session leases for the others at once.
   */
  async joinCluster({ instanceId, leaseTtlMs }: ClusterMembership): Promise<void> {
    const logger = this.deps.logger;
    // Two gateways under one id would share their leases, and exclude nothing. A row left by a
    // process of this host that is gone (a crash, then a restart under the same id) is no twin.
    // Alive is judged on the database's clock: this host's may be off.
    const twin = (await this.store.listInstances()).find(
      (i) =>
        i.id === instanceId &&
        (i.host !== hostname() || i.pid !== process.pid) &&
        i.heartbeatAgeMs < 2 * leaseTtlMs,
    );
    if (twin && (twin.host !== hostname() || (await isProcessAlive(twin.pid)))) {
      throw new Error(
        `another gateway runs as instance ${instanceId} (${twin.host}, pid ${twin.pid}); give each gateway its own cluster.instance_id (KEEL_INSTANCE_ID)`,
      );
    }
    const identity = await currentIdentity(instanceId);
    const predecessor = await readPredecessor(this.deps.home);
    const self = {
      id: instanceId,
      host: hostname(),
      pid: process.pid,
      startedAt: this.startedAt,
      platforms: this.deps.platforms(),
    };
    await this.store.registerInstance(self);
    if (predecessor && predecessor.id !== instanceId)
      await this.retirePredecessor(predecessor, identity);
    // Without the record the next restart waits out the TTL, as before: no reason not to start.
    await recordIdentity(this.deps.home, identity).catch((err: unknown) =>
      logger.warn({ err }, "could not record this gateway in its home for the next restart"),
    );
    const heartbeat = startHeartbeat(this.store, self, leaseTtlMs, logger);
    this.heartbeat = heartbeat;
    const watch = createInstanceWatch(
      this.store,
      { instanceId, leaseTtlMs },
      this.now,
      this.deps.onChange,
    );
    // Takeover: a running turn whose session lease nobody renews any more belongs to a gateway
    // that died (or froze); it is recovered here exactly as a restart would recover it.
    const sweep = setInterval(() => {
      if (this.phase !== "running") return;
      // Then the queue of gateways that stopped heartbeating is run here, and the rows of those
      // dead long enough, whose turns were taken over, go.
      this.takeOverOnce(instanceId, leaseTtlMs)
        .then(() => this.adoptQueued(instanceId, leaseTtlMs))
        .then(() => forgetDeadInstances(this.store, leaseTtlMs, logger))
        .then(watch)
        .catch((err: unknown) => logger.warn({ err }, "takeover sweep failed"));
    }, leaseTtlMs);
    sweep.unref();
    this.stopPath.arm("leave the cluster", async () => {
      clearInterval(sweep);
      await heartbeat.stop();
      await this.store.removeInstance(instanceId);
    });
    logger.info({ instanceId, leaseTtlMs }, "joined the gateways sharing this store");
  }

  /**
   * This home's previous gateway, when it is provably gone (a crash, then a restart under a new
   * instance id): its row goes and its leases are freed now, so this start recovers its turns,
   * runs its queue and takes its connections at once instead of after the lease TTL. A restart
   * under the same id needs none of it (an owner takes its own leases back).
   */
  private async retirePredecessor(
    predecessor: InstanceIdentity,
    self: InstanceIdentity,
  ): Promise<void> {
    const logger = this.deps.logger;
    // Its row is gone: it stopped cleanly (its leases went with the row), or was forgotten.
    const row = (await this.store.listInstances()).find((i) => i.id === predecessor.id);
    if (!row) return;
    const proof = await provenDead(predecessor, self);
    if (!proof) {
      logger.info(
        { predecessor: predecessor.id, host: predecessor.host, predecessorPid: predecessor.pid },
        "this home's previous gateway cannot be proven gone; its leases run out by themselves",
      );
      return;
    }
    // The id may since name another gateway (an operator's choice): never retire a stranger.
    if (row.host !== predecessor.host || row.pid !== predecessor.pid) return;
    await this.store.removeInstance(predecessor.id);
    // What its takeover sweep held when it died goes too (removeInstance frees an owner's leases).
    await this.store.removeInstance(`${predecessor.id}:takeover`);
    // And what its chat commands held (they act under a lease of their own name).
    await this.store.removeInstance(`${predecessor.id}:command`);
    logger.warn(
      { predecessor: predecessor.id, predecessorPid: predecessor.pid, proof },
      "took over the leases of this home's previous gateway, which is gone",
    );
  }

  /**
   * A takeover now, not at the next sweep: the runner saw the store answer again after turns of
   * this gateway were cut off by it (a database restart), and has given up their leases.
   */
  takeOverSoon(): void {
    if (this.phase !== "running") return;
    const { instanceId, leaseTtlMs } = this.deps.cluster;
    this.takeOverOnce(instanceId, leaseTtlMs).catch((err: unknown) =>
      this.deps.logger.warn({ err }, "takeover failed"),
    );
  }

  private takeOverOnce(instanceId: string, leaseTtlMs: number): Promise<void> {
    this.takingOver ??= this.takeOver(instanceId, leaseTtlMs).finally(() => {
      this.takingOver = null;
    });
    return this.takingOver;
  }

  /**
   * Recovers the cut-off turns of gateways that stopped renewing their leases, then resumes
   * those sessions here. It claims under its own owner name, so it never takes a session this
   * gateway's runner holds.
   */
  private async takeOver(instanceId: string, leaseTtlMs: number): Promise<void> {
    const report = await recoverInterruptedWork(this.store, {
      cleanShutdown: true,
      now: this.now(),
      leases: { owner: `${instanceId}:takeover`, ttlMs: leaseTtlMs },
    });
    if (report.markedSessions.length === 0) return;
    const logger = this.deps.logger;
    logger.warn({ ...report }, "took over the turns of a gateway that stopped renewing its leases");
    await resumeHeldBack({
      store: this.store,
      runner: this.runner,
      keys: report.markedSessions,
      logger,
    });
  }

  /**
   * The open inbox items this gateway runs at start: its own (a restart under the same id), those
   * of gateways that died and those no gateway stamped; never a live gateway's queue.
   */
  inboxAtStart(): Promise<InboxItem[]> {
    const { instanceId, leaseTtlMs } = this.deps.cluster;
    return this.store.adoptPendingInbox(instanceId, 2 * leaseTtlMs, { includeOwn: true });
  }

  /**
   * Runs the messages a gateway accepted and never started before it stopped heartbeating (two
   * lease TTLs): each goes to one survivor, and should the other wake up after all, the store
   * lets only one of them start it.
   */
  private async adoptQueued(instanceId: string, leaseTtlMs: number): Promise<void> {
    const items = await this.store.adoptPendingInbox(instanceId, 2 * leaseTtlMs);
    if (items.length === 0) return;
    this.deps.logger.warn(
      { inboxIds: items.map((i) => i.id) },
      "running the messages queued by a gateway that stopped heartbeating",
    );
    await this.runner.dispatchOpenInbox(async () => items);
  }

  /** The gateways sharing the store, alive or dead, with the sessions each holds a live lease on. */
  instances(): Promise<NonNullable<GatewayStatus["instances"]>> {
    return describeInstances(this.store, this.deps.cluster, this.now());
  }
}
