/**
 * This gateway's row among the gateways sharing a Postgres store, and what operators see of all
 * of them: the heartbeat (which registers the row again when it was forgotten while this
 * gateway was frozen), which instances are alive, and the removal of dead ones' rows once their
 * cut-off turns were taken over, so a lost host does not stay listed forever.
 */
import type { Logger } from "pino";
import type { GatewayStatus } from "../control/control-surface.js";
import type { ClusterStore, InstanceInput, InstanceRecord } from "../sessions/store.js";

/**
 * A dead instance's row is removed once it has been silent this many lease TTLs (and nobody runs
 * a turn under its leases any more): long enough for an operator to see it in the status, and
 * well past the takeover, which happens within about two TTLs.
 */
export const FORGET_AFTER_TTLS = 10;

/**
 * Alive: it heartbeat within one lease TTL (it beats every third of it). Past that its session
 * leases have run out too, and the others take its cut-off turns over.
 */
export function isAlive(instance: InstanceRecord, leaseTtlMs: number): boolean {
  return instance.heartbeatAgeMs < leaseTtlMs;
}

export interface Heartbeat {
  /**
   * False while the store refuses or cannot be reached: the last beat failed, or none got
   * through for a lease TTL (a database that drops packets makes calls hang, not fail).
   */
  healthy(): boolean;
  /** Stops beating, after the beat in flight (so it cannot register the row again later). */
  stop(): Promise<void>;
}

/** Beats every third of the lease TTL; the row must already be registered. */
export function startHeartbeat(
  store: ClusterStore,
  self: InstanceInput,
  leaseTtlMs: number,
  logger: Logger,
): Heartbeat {
  let healthy = true;
  let lastOk = Date.now();
  let stopped = false;
  let inFlight: Promise<void> = Promise.resolve();
  const beat = async (): Promise<void> => {
    try {
      if (!(await store.heartbeatInstance(self.id)) && !stopped) {
        // Frozen past FORGET_AFTER_TTLS (a VM pause, SIGSTOP): the others removed the row. The
        // fences already kept this gateway from writing over them; it is alive again now.
        await store.registerInstance(self);
        logger.warn(
          { instanceId: self.id },
          "this instance's row was gone from the store (presumed dead); registered again",
        );
      }
      if (!healthy) logger.info({ instanceId: self.id }, "heartbeat recorded again");
      healthy = true;
      lastOk = Date.now();
    } catch (err) {
      if (healthy) logger.warn({ err }, "heartbeat failed: the store does not answer");
      healthy = false;
    }
  };
  const timer = setInterval(() => {
    inFlight = inFlight.then(beat);
  }, leaseTtlMs / 3);
  timer.unref();
  return {
    healthy: () => healthy && Date.now() - lastOk < leaseTtlMs,
    async stop() {
      stopped = true;
      clearInterval(timer);
      await inFlight;
    },
  };
}

/** Removes the rows of instances dead for {@link FORGET_AFTER_TTLS} whose turns were taken over. */
export async function forgetDeadInstances(
  store: ClusterStore,
  leaseTtlMs: number,
  logger: Logger,
): Promise<void> {
  const removed = await store.removeDeadInstances(Math.round(FORGET_AFTER_TTLS * leaseTtlMs));
  for (const i of removed) {
    logger.info(
      { instanceId: i.id, host: i.host, pid: i.pid, heartbeatAt: new Date(i.heartbeatAt) },
      "removed the row of a dead gateway (its turns were taken over)",
    );
  }
}

/** Every gateway sharing the store, alive or dead, with the sessions each holds a live lease on. */
export async function describeInstances(
  store: ClusterStore,
  self: { instanceId: string; leaseTtlMs: number },
  now: number,
): Promise<NonNullable<GatewayStatus["instances"]>> {
  const [instances, leases] = await Promise.all([store.listInstances(), store.listSessionLeases()]);
  return instances.map((i) => ({
    id: i.id,
    host: i.host,
    pid: i.pid,
    started_at: new Date(i.startedAt).toISOString(),
    heartbeat_at: new Date(i.heartbeatAt).toISOString(),
    heartbeat_age_seconds: Math.floor(i.heartbeatAgeMs / 1000),
    alive: isAlive(i, self.leaseTtlMs),
    self: i.id === self.instanceId,
    sessions: leases
      .filter((l) => l.owner === i.id && l.expiresAt > now && !isDeliveryLease(l.sessionKey))
      .map((l) => l.sessionKey),
  }));
}

/**
 * The outbox's per-chat delivery leases and the platform connections' leases (`poller:`) share
 * the table; they are no session held.
 */
function isDeliveryLease(key: string): boolean {
  return key.startsWith("outbox:") || key.startsWith("poller:");
}

/**
 * A check to run now and then: calls `onChange` when what the status shows of the gateways
 * changed (one appeared, died, was removed, or holds other sessions), since the status stream
 * only pushes on changes and another gateway's death is no event here.
 */
export function createInstanceWatch(
  store: ClusterStore,
  self: { instanceId: string; leaseTtlMs: number },
  now: () => number,
  onChange: () => void,
): () => Promise<void> {
  let last = "";
  return async () => {
    const seen = (await describeInstances(store, self, now()))
      .map((i) => `${i.id}:${i.alive}:${i.sessions.join(",")}`)
      .join("|");
    if (seen !== last) onChange();
    last = seen;
  };
}
