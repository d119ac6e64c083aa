/**
 * ClusterStore, the store's role for several gateways on one store (re-exported by roles.ts with
 * the other roles); what cluster/pg.ts and cluster/sqlite.ts implement.
 */
import type { InstanceInput, InstanceRecord, LeaseToken, SessionLease } from "../records.js";

/** Several gateways on one store: their instance rows and the leases they hold. */
export interface ClusterStore {
  /**
   * Records a gateway sharing this store (or refreshes its row after a restart under the same
   * id); its heartbeat starts now.
   */
  registerInstance(instance: InstanceInput): Promise<InstanceRecord>;
  /** Refreshes the instance's heartbeat; false when its row is gone (it was removed). */
  heartbeatInstance(id: string): Promise<boolean>;
  /** Removes the instance (a planned stop) and gives up its session leases. */
  removeInstance(id: string): Promise<void>;
  /** Every registered instance, oldest first. */
  listInstances(): Promise<InstanceRecord[]>;
  /**
   * Ids of the instances that heartbeated within `staleMs` (the store's clock); with `platform`,
   * only those that deliver to it (or did not say which platforms they have).
   */
  listLiveInstances(staleMs: number, platform?: string): Promise<string[]>;
  /**
   * Forgets the instances silent (no heartbeat) for at least `silentForMs` on the store's clock
   * whose cut-off turns were taken over: none still runs a turn under one of their session
   * leases. Their leases are left as they are (expired by then). Returns the removed rows.
   */
  removeDeadInstances(silentForMs: number): Promise<InstanceRecord[]>;
  /**
   * Leases are keyed by name: a session's key, `outbox:<chat>` for a chat's delivery, and
   * `poller:<platform>:<hash>` for a platform connection only one gateway may hold (cluster/).
   *
   * Takes the session's lease for `owner` for `ttlMs`, unless another owner holds a live one
   * (then null). Taking it from another owner (or after them) raises the fence, so their writes
   * with the old token fail from then on; renewing your own keeps it.
   */
  claimSessionLease(sessionKey: string, owner: string, ttlMs: number): Promise<SessionLease | null>;
  /**
   * Extends a lease still held with this token; null when it moved on or was let go (released,
   * or freed with its gateway's instance): a renewal landing just after must not take it back
   * from the gateway about to claim it.
   */
  renewSessionLease(lease: LeaseToken, ttlMs: number): Promise<SessionLease | null>;
  /** claimSessionLease for many in one transaction: the leases taken, by session key. */
  claimSessionLeases(
    keys: readonly string[],
    owner: string,
    ttlMs: number,
  ): Promise<Map<string, SessionLease>>;
  /** Lets the lease go (another owner may take it at once); nothing when it already moved on. */
  releaseSessionLease(lease: LeaseToken): Promise<void>;
  /** releaseSessionLease for many, in one transaction. */
  releaseSessionLeases(leases: readonly LeaseToken[]): Promise<void>;
  /** Current leases (live or not), by session key. */
  listSessionLeases(): Promise<SessionLease[]>;
}
