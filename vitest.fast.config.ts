/**
 * `npm run test:fast`, the inner loop: the unit and in-process integration tests, without a build
 * and without the tests that start Node processes (each pays Node's and tsx's start-up): those run
 * in `npm test`, and on Node 24 in `npm run test:node`. The shells the agent's terminal tool
 * starts are the tool under test and stay.
 */
import { configDefaults, defineConfig } from "vitest/config";
import base from "./vitest.config.js";

/** Tests that start Node processes, each named with what it starts. */
const PROCESS_TESTS = [
  // Gateways from dist/, at their crash points.
  "test/integration/recovery-crash-points.test.ts",
  // A tsx child that better-sqlite3 would abort in a garbage collection (Node 24).
  "src/sessions/sqlite-database.test.ts",
  // An MCP server over stdio, through tsx.
  "test/integration/mcp.test.ts",
  // The detached restart helper and the old gateway it waits for.
  "src/lifecycle/restart-helper.test.ts",
  // Live processes that hold or race for the pid file.
  "src/lifecycle/pid-file.test.ts",
  // The image's health probe script.
  "src/service/container-files.test.ts",
];

export default defineConfig({
  ...base,
  test: {
    ...base.test,
    include: [
      "src/**/*.test.ts",
      "scripts/**/*.test.ts",
      "test/integration/**/*.test.ts",
      // In-process too: every platform through its stand-in.
      "test/platform-contract.test.ts",
    ],
    exclude: [...configDefaults.exclude, ...PROCESS_TESTS],
    // These tests mostly wait (streams paced like a platform's limits, retry-after, timeouts):
    // about 170 s of test time on 40 s of CPU. Eight workers overlap the waits on two cores
    // (measured here: 4 workers 42 s, 6 workers 32-34 s, 8 workers 29.5-32 s).
    maxWorkers: 8,
    // Transformed modules are kept under node_modules between runs: the inner loop reruns the
    // same files, and the transform was a third of its CPU.
    experimental: { fsModuleCache: true },
  },
});
