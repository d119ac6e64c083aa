/**
 * bin/keel.js turns on Node's compile cache where Node has one (22.8+, reached through
 * process.getBuiltinModule): a start then skips compiling the bundle the previous start compiled.
 * CI runs this file on Node 24 (`npm run test:node`); on Node 20 there is nothing to check.
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import module from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { childEnv, isBuilt, KEEL_BIN } from "../helpers/gateway-process.js";

const hasCompileCache =
  typeof process.getBuiltinModule === "function" &&
  typeof (module as { enableCompileCache?: unknown }).enableCompileCache === "function";

let folder: string | undefined;

afterEach(() => {
  if (folder) rmSync(folder, { recursive: true, force: true });
  folder = undefined;
});

describe.skipIf(!hasCompileCache)("the launcher on a Node with a compile cache", () => {
  it("leaves the compiled bundle in the cache folder for the next start", () => {
    if (!isBuilt()) throw new Error("run `npm run build` first: this test starts bin/keel.js");
    folder = mkdtempSync(join(tmpdir(), "keel-compile-cache-"));
    const version = execFileSync(process.execPath, [KEEL_BIN, "--version"], {
      // The cache's default place is the temp folder; NODE_COMPILE_CACHE would turn it on alone.
      env: childEnv({ TMPDIR: folder }),
      encoding: "utf8",
    });
    expect(version.trim()).toMatch(/^\d+\.\d+\.\d+/);
    const entries = readdirSync(join(folder, "node-compile-cache"), {
      recursive: true,
      withFileTypes: true,
    });
    expect(entries.filter((entry) => entry.isFile()).length).toBeGreaterThan(0);
  });
});
