/**
 * The import check (`npm run check`): imports in src/ point one way, down the layers listed in
 * docs/architecture.md, and no two modules import each other, even through others. A module may
 * import its own layer and the layers below it; anything else is reported with the edge to fix.
 * Test files are exempt (a test may reach anything to set up its case).
 */
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";

/** Lowest first. A path names a folder (`src/runner/`) or a single file. */
export const LAYERS: readonly { name: string; paths: readonly string[] }[] = [
  // The chat-platform contract: the types every layer speaks; imports nothing of ours.
  { name: "contract", paths: ["src/contract/"] },
  { name: "lib", paths: ["src/lib/"] },
  { name: "config", paths: ["src/config/"] },
  { name: "service", paths: ["src/service/"] },
  { name: "agent", paths: ["src/agent/"] },
  // MCP servers as tools: built on the agent's tool contract.
  { name: "mcp", paths: ["src/mcp/"] },
  { name: "store", paths: ["src/sessions/"] },
  // Per-user memory files and the memory tool.
  { name: "memory", paths: ["src/memory/"] },
  // The context budget and compaction (over the agent's model client and the store types).
  { name: "context", paths: ["src/context/"] },
  { name: "control", paths: ["src/control/"] },
  // Several gateways on one store: the leases on platform connections, the inbox handover.
  { name: "cluster", paths: ["src/cluster/"] },
  // Adapters: below the runner, which they reach only through the contract.
  { name: "platforms", paths: ["src/platforms/"] },
  { name: "runner", paths: ["src/runner/"] },
  // Approvals implement the runner's gate contract (runner/agent-run.ts).
  { name: "approvals", paths: ["src/approvals/"] },
  // Budgets and sender limits implement the runner's model-call and intake gates.
  { name: "budgets", paths: ["src/budgets/"] },
  { name: "schedules", paths: ["src/schedules/"] },
  // Subagents and background tasks: child sessions the runner runs, started and ended here.
  { name: "tasks", paths: ["src/tasks/"] },
  { name: "recovery", paths: ["src/recovery/"] },
  { name: "lifecycle", paths: ["src/lifecycle/"] },
  // The data lifecycle: retention, one person's export and erasure, backups and restore.
  { name: "data", paths: ["src/data/"] },
  { name: "alerts", paths: ["src/alerts/"] },
  // Metrics and traces, fed from the parts' events; wired by the gateway.
  { name: "telemetry", paths: ["src/telemetry/"] },
  { name: "gateway", paths: ["src/gateway/"] },
  { name: "cli", paths: ["src/cli/", "src/main.ts"] },
];

/**
 * Layers only the wiring (gateway, cli) may import: the rest of the house reaches an adapter
 * through the contract, never by name.
 */
const WIRING_ONLY: readonly string[] = ["platforms"];
const WIRING: readonly string[] = ["gateway", "cli"];

export interface Violation {
  from: string;
  to: string;
  why: string;
}

/** The layer index of a repository-relative path (the most specific match), or -1. */
export function layerOf(path: string): number {
  let best = -1;
  let bestLength = -1;
  LAYERS.forEach((layer, index) => {
    for (const prefix of layer.paths) {
      const hit = prefix.endsWith("/") ? path.startsWith(prefix) : path === prefix;
      if (hit && prefix.length > bestLength) {
        best = index;
        bestLength = prefix.length;
      }
    }
  });
  return best;
}

/** Relative imports of one source file, as repository-relative `.ts` paths. */
export function importsOf(path: string, source: string): string[] {
  const { importedFiles } = ts.preProcessFile(source, true, true);
  return importedFiles
    .map((f) => f.fileName)
    .filter((spec) => spec.startsWith("."))
    .map((spec) => join(dirname(path), spec).replace(/\.js$/, ".ts"));
}

/** Checks a set of modules (repository-relative path → source). */
export function checkImports(files: ReadonlyMap<string, string>): Violation[] {
  const violations: Violation[] = [];
  const graph = new Map<string, string[]>();
  for (const [path, source] of files) {
    if (path.endsWith(".test.ts")) continue;
    const targets = importsOf(path, source);
    graph.set(path, targets);
    const from = layerOf(path);
    for (const to of targets) {
      const target = layerOf(to);
      if (from === -1 || target === -1) {
        violations.push({ from: path, to, why: "module outside the listed layers" });
      } else if (target > from) {
        violations.push({
          from: path,
          to,
          why: `${LAYERS[from]?.name} may not import ${LAYERS[target]?.name} (a higher layer)`,
        });
      } else if (wiringOnlyBreach(from, target)) {
        violations.push({
          from: path,
          to,
          why: `${LAYERS[from]?.name} may not import ${LAYERS[target]?.name} (only the wiring may)`,
        });
      }
    }
  }
  for (const cycle of findCycles(graph)) {
    violations.push({
      from: cycle[0] ?? "",
      to: cycle[1] ?? "",
      why: `import cycle: ${cycle.join(" → ")}`,
    });
  }
  return violations;
}

/**
 * Files that may open better-sqlite3 themselves: its guard, and the fixture that shows why the
 * guard exists. Anywhere else — tests included, since one collected statement aborts the whole
 * test process on Node 24 — a database is opened through openSqliteDatabase.
 */
const RAW_SQLITE_ALLOWED: readonly string[] = [
  "src/sessions/sqlite-database.ts",
  "test/fixtures/drop-statements.ts",
];
const RAW_SQLITE_IMPORT = /^\s*import\s+(?!type\b)[^;]*from\s+["']better-sqlite3["']/m;

/** Files that import better-sqlite3's value (not only its types) outside the guard. */
export function rawSqliteImports(files: ReadonlyMap<string, string>): Violation[] {
  return [...files]
    .filter(
      ([path, source]) => !RAW_SQLITE_ALLOWED.includes(path) && RAW_SQLITE_IMPORT.test(source),
    )
    .map(([path]) => ({
      from: path,
      to: "better-sqlite3",
      why: "open SQLite through src/sessions/sqlite-database.ts (a collected statement aborts Node 24)",
    }));
}

function wiringOnlyBreach(from: number, target: number): boolean {
  const fromName = LAYERS[from]?.name ?? "";
  const targetName = LAYERS[target]?.name ?? "";
  return from !== target && WIRING_ONLY.includes(targetName) && !WIRING.includes(fromName);
}

/** One cycle per strongly connected group of modules (Tarjan), as a closed path. */
function findCycles(graph: ReadonlyMap<string, string[]>): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const cycles: string[][] = [];
  let counter = 0;
  const visit = (node: string): void => {
    index.set(node, counter);
    low.set(node, counter);
    counter += 1;
    stack.push(node);
    onStack.add(node);
    for (const next of graph.get(node) ?? []) {
      if (!graph.has(next)) continue;
      if (!index.has(next)) {
        visit(next);
        low.set(node, Math.min(low.get(node) ?? 0, low.get(next) ?? 0));
      } else if (onStack.has(next)) {
        low.set(node, Math.min(low.get(node) ?? 0, index.get(next) ?? 0));
      }
    }
    if (low.get(node) !== index.get(node)) return;
    const group: string[] = [];
    let member: string | undefined;
    do {
      member = stack.pop();
      if (member === undefined) break;
      onStack.delete(member);
      group.push(member);
    } while (member !== node);
    const selfLoop = (graph.get(node) ?? []).includes(node);
    if (group.length > 1 || selfLoop) cycles.push([...group.reverse(), node]);
  };
  for (const node of graph.keys()) if (!index.has(node)) visit(node);
  return cycles;
}

/** Every `.ts` file under `dir`, repository-relative to `root`. */
export function readSources(root: string, dir = "src"): Map<string, string> {
  const files = new Map<string, string>();
  const walk = (folder: string): void => {
    for (const entry of readdirSync(join(root, folder), { withFileTypes: true })) {
      const path = join(folder, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (entry.name.endsWith(".ts")) files.set(path, readFileSync(join(root, path), "utf8"));
    }
  };
  walk(dir);
  return files;
}

const self = fileURLToPath(import.meta.url);
if (process.argv[1] && resolve(process.argv[1]) === self) {
  const root = resolve(dirname(self), "..");
  const everywhere = new Map([
    ...readSources(root, "test"),
    ...readSources(root, "bench"),
    ...readSources(root, "scripts"),
  ]);
  const violations = [
    ...checkImports(readSources(root)),
    ...rawSqliteImports(new Map([...readSources(root), ...everywhere])),
  ];
  for (const v of violations) {
    process.stderr.write(`${relative(".", v.from)} → ${v.to}: ${v.why}\n`);
  }
  if (violations.length > 0) process.exit(1);
  process.stdout.write(
    "imports: every edge points down the layers, no cycles, SQLite opened only through its guard\n",
  );
}
