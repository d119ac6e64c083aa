import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { createTempDir } from "../../test/helpers/temp-home.js";

const CHILD = join(import.meta.dirname, "../../test/fixtures/drop-statements.ts");

function run(mode: "guarded" | "raw") {
  const dir = createTempDir();
  try {
    return spawnSync(process.execPath, ["--import", "tsx", CHILD, join(dir.path, "x.db"), mode], {
      encoding: "utf8",
      timeout: 60_000,
    });
  } finally {
    dir.cleanup();
  }
}

describe("openSqliteDatabase", () => {
  // On Node 24.21 with better-sqlite3 12 built against its headers (CI's Node 24 run), the same
  // child in "raw" mode aborts with "Assertion failed: (env) != nullptr" (exit 134).
  it("survives preparing and dropping many statements, and closing", () => {
    const child = run("guarded");
    expect(child.stderr).not.toMatch(/Assertion failed/);
    expect(child.status).toBe(0);
    expect(child.stdout).toBe("survived 0\n");
  });
});
