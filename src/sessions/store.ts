/**
 * The store contract: everything durable goes through it, one method per transaction. The methods
 * are declared by role (roles.ts) over the records of records.ts; `Store` is every role at once.
 * Two implementations (SQLite in sqlite-store.ts, Postgres in pg-store.ts) pass the same suite
 * (store*.test.ts), so nothing here may assume either. Times are epoch milliseconds.
 */
export * from "./budget-records.js";
export * from "./records.js";
export * from "./retention-records.js";
export type * from "./roles.js";
export * from "./task-records.js";

import type {
  ApprovalStore,
  BudgetStore,
  ClusterStore,
  InboxStore,
  OutboxStore,
  PairingStore,
  PlatformDataStore,
  ReportingStore,
  RetentionStore,
  ScheduleStore,
  SessionStore,
  StoreHandle,
  StreamStore,
  TaskStore,
  TurnStore,
} from "./roles.js";

/** Every role at once: what the composition root opens, and what each engine implements. */
export interface Store
  extends InboxStore,
    SessionStore,
    TurnStore,
    OutboxStore,
    StreamStore,
    ApprovalStore,
    BudgetStore,
    PairingStore,
    PlatformDataStore,
    ScheduleStore,
    ClusterStore,
    ReportingStore,
    TaskStore,
    RetentionStore,
    StoreHandle {}
