/** A session's lease, when several gateways share the store: claimed, renewed, given up. */
import { setTimeout as delay } from "node:timers/promises";
import type { Logger } from "pino";
import type { ClusterStore, LeaseToken } from "../sessions/store.js";
import type { ActiveTurn } from "./lane.js";

/**
 * Waits for the session's lease: another instance running a turn of it releases it when that
 * turn ends (or its lease runs out). Null when this turn was aborted while waiting.
 */
export async function claimTurnLease(
  store: ClusterStore,
  active: ActiveTurn,
  { owner, ttlMs }: { owner: string; ttlMs: number },
): Promise<LeaseToken | null> {
  const signal = active.controller.signal;
  for (;;) {
    const lease = await store.claimSessionLease(active.sessionKey, owner, ttlMs);
    if (lease) return lease;
    if (signal.aborted) return null;
    await delay(Math.min(ttlMs / 3, 500), undefined, { signal }).catch(() => {});
  }
}

/** A lease that moved on is not fought for: the turn's next write is refused by the store. */
export async function renewTurnLease(
  store: ClusterStore,
  logger: Logger,
  active: ActiveTurn,
  ttlMs: number,
): Promise<void> {
  if (!active.lease) return;
  let renewed: LeaseToken | null;
  try {
    renewed = await store.renewSessionLease(active.lease, ttlMs);
  } catch (err) {
    // Not lost yet: the lease runs out unless a later renewal gets through in time.
    logger.warn(
      { err, session: active.sessionKey },
      "could not renew the session's lease (the store does not answer)",
    );
    return;
  }
  if (!renewed) {
    logger.warn(
      { session: active.sessionKey, fence: active.lease.fence },
      "the session's lease moved to another instance; this turn's writes will be refused",
    );
  }
}

/**
 * Runs `act` under `lease` (a chat command's, several gateways only), renewing it every third of
 * `ttlMs`, and gives the lease up after.
 */
export async function holdingLease(
  store: ClusterStore,
  logger: Logger,
  held: LeaseToken,
  ttlMs: number,
  act: () => Promise<void>,
): Promise<void> {
  const renewal = setInterval(() => {
    store.renewSessionLease(held, ttlMs).catch((err: unknown) => {
      logger.warn({ err, session: held.sessionKey }, "command lease renewal failed");
    });
  }, ttlMs / 3);
  renewal.unref();
  try {
    await act();
  } finally {
    clearInterval(renewal);
    await store.releaseSessionLease(held).catch((err: unknown) => {
      logger.warn({ err, session: held.sessionKey }, "lease release failed");
    });
  }
}
