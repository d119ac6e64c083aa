/**
 * The store's cut by role holds: no role grows past 25 methods, `Store` is every role, and each
 * engine's module for a role gives exactly that role's methods (no more: the engine's class
 * would take them on silently).
 */
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import ts from "typescript";
import { describe, expect, it } from "vitest";
import { pgApprovals } from "./approvals/pg.js";
import { sqliteApprovals } from "./approvals/sqlite.js";
import { pgBudgets } from "./budgets/pg.js";
import { sqliteBudgets } from "./budgets/sqlite.js";
import { pgCluster } from "./cluster/pg.js";
import { sqliteCluster } from "./cluster/sqlite.js";
import { pgInbox } from "./inbox/pg.js";
import { sqliteInbox } from "./inbox/sqlite.js";
import { pgOutbox } from "./outbox/pg.js";
import { sqliteOutbox } from "./outbox/sqlite.js";
import { pgPairing } from "./pairing/pg.js";
import { sqlitePairing } from "./pairing/sqlite.js";
import { pgPlatformData } from "./platform-data/pg.js";
import { sqlitePlatformData } from "./platform-data/sqlite.js";
import { pgReporting } from "./reporting/pg.js";
import { sqliteReporting } from "./reporting/sqlite.js";
import { pgRetention } from "./retention/pg.js";
import { sqliteRetention } from "./retention/sqlite.js";
import { pgSchedules } from "./schedules/pg.js";
import { sqliteSchedules } from "./schedules/sqlite.js";
import { pgSessionState } from "./session-state/pg.js";
import { sqliteSessionState } from "./session-state/sqlite.js";
import { pgStreams } from "./streams/pg.js";
import { sqliteStreams } from "./streams/sqlite.js";
import { pgTasks } from "./tasks/pg.js";
import { sqliteTasks } from "./tasks/sqlite.js";
import { pgTurns } from "./turns/pg.js";
import { sqliteTurns } from "./turns/sqlite.js";

const MAX_METHODS = 25;

function interfaces(file: string): Map<string, { methods: string[]; extends: string[] }> {
  const path = fileURLToPath(new URL(file, import.meta.url));
  const source = ts.createSourceFile(path, readFileSync(path, "utf8"), ts.ScriptTarget.Latest);
  const found = new Map<string, { methods: string[]; extends: string[] }>();
  for (const node of source.statements) {
    if (!ts.isInterfaceDeclaration(node)) continue;
    found.set(node.name.text, {
      methods: node.members.filter(ts.isMethodSignature).map((m) => (m.name as ts.Identifier).text),
      extends: (node.heritageClauses ?? []).flatMap((h) =>
        h.types.map((t) => t.expression.getText(source)),
      ),
    });
  }
  return found;
}

// ClusterStore sits in its folder, re-exported by roles.ts (which is at its size budget).
const roles = new Map([...interfaces("./roles.ts"), ...interfaces("./cluster/role.ts")]);
const store = interfaces("./store.ts").get("Store")!;

describe("store roles", () => {
  it(`keeps every role at ${MAX_METHODS} methods or fewer`, () => {
    expect(roles.size).toBeGreaterThan(0);
    const over = [...roles].filter(([, role]) => role.methods.length > MAX_METHODS);
    expect(over.map(([name, role]) => `${name}: ${role.methods.length}`)).toEqual([]);
  });

  it("makes Store every role, each method in one role only", () => {
    expect(store.methods).toEqual([]);
    expect([...store.extends].sort()).toEqual([...roles.keys()].sort());
    const all = [...roles.values()].flatMap((role) => role.methods);
    expect(new Set(all).size).toBe(all.length);
  });

  // The factories only close over the context: building them calls nothing.
  const modules: [string, string, (s: never) => object][] = [
    ["InboxStore", "sqlite", sqliteInbox],
    ["InboxStore", "pg", pgInbox],
    ["SessionStore", "sqlite", sqliteSessionState],
    ["SessionStore", "pg", pgSessionState],
    ["TurnStore", "sqlite", sqliteTurns],
    ["TurnStore", "pg", pgTurns],
    ["OutboxStore", "sqlite", sqliteOutbox],
    ["OutboxStore", "pg", pgOutbox],
    ["StreamStore", "sqlite", sqliteStreams],
    ["StreamStore", "pg", pgStreams],
    ["TaskStore", "sqlite", sqliteTasks],
    ["TaskStore", "pg", pgTasks],
    ["ApprovalStore", "sqlite", sqliteApprovals],
    ["ApprovalStore", "pg", pgApprovals],
    ["BudgetStore", "sqlite", sqliteBudgets],
    ["BudgetStore", "pg", pgBudgets],
    ["PairingStore", "sqlite", sqlitePairing],
    ["PairingStore", "pg", pgPairing],
    ["PlatformDataStore", "sqlite", sqlitePlatformData],
    ["PlatformDataStore", "pg", pgPlatformData],
    ["ScheduleStore", "sqlite", sqliteSchedules],
    ["ScheduleStore", "pg", pgSchedules],
    ["ClusterStore", "sqlite", sqliteCluster],
    ["ClusterStore", "pg", pgCluster],
    ["ReportingStore", "sqlite", sqliteReporting],
    ["ReportingStore", "pg", pgReporting],
    ["RetentionStore", "sqlite", sqliteRetention],
    ["RetentionStore", "pg", pgRetention],
  ];

  it.each(modules)(
    "%s on %s: the module gives exactly the role's methods",
    (role, _engine, factory) => {
      const methods = Object.keys(factory({} as never)).sort();
      expect(methods).toEqual([...roles.get(role)!.methods].sort());
    },
  );

  it("has a role module for every role but the handle, on both engines", () => {
    const covered = new Set(modules.map(([role]) => role));
    expect([...roles.keys()].filter((role) => !covered.has(role))).toEqual(["StoreHandle"]);
  });
});
