import { resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { checkImports, layerOf, rawSqliteImports, readSources } from "./import-layers.js";

const root = resolve(import.meta.dirname, "..");

describe("the import check", () => {
  it("passes on the source tree as it is", () => {
    expect(checkImports(readSources(root))).toEqual([]);
  });

  it("allows better-sqlite3 only through its guard, in tests too", () => {
    const files = new Map([...readSources(root), ...readSources(root, "test")]);
    expect(rawSqliteImports(files)).toEqual([]);
    files.set("test/integration/x.test.ts", 'import Database from "better-sqlite3";\n');
    files.set("src/sessions/y.ts", 'import type Database from "better-sqlite3";\n');
    expect(rawSqliteImports(files).map((v) => v.from)).toEqual(["test/integration/x.test.ts"]);
  });

  it("fails on a back-edge: the store importing the runner", () => {
    const files = readSources(root);
    const store = files.get("src/sessions/store.ts") ?? "";
    files.set(
      "src/sessions/store.ts",
      `import type { Runner } from "../runner/runner.js";\n${store}`,
    );
    const violations = checkImports(files);
    expect(violations).toContainEqual({
      from: "src/sessions/store.ts",
      to: "src/runner/runner.ts",
      why: "store may not import runner (a higher layer)",
    });
    // The runner imports the store, so the back-edge closes a cycle too.
    expect(violations.map((v) => v.why.split(":")[0])).toEqual([
      "store may not import runner (a higher layer)",
      "import cycle",
    ]);
  });

  it("fails when an adapter imports the runner instead of taking events from the contract", () => {
    const files = new Map([
      ["src/platforms/telegram/x.ts", `import { EventFanout } from "../../runner/events.js";`],
      ["src/runner/events.ts", ""],
    ]);
    expect(checkImports(files).map((v) => v.why)).toEqual([
      "platforms may not import runner (a higher layer)",
    ]);
  });

  it("fails when anything but the wiring imports an adapter", () => {
    const files = new Map([
      ["src/runner/x.ts", `import { PlatformRegistry } from "../platforms/kit/registry.js";`],
      ["src/platforms/kit/registry.ts", ""],
      ["src/gateway/y.ts", `import { x } from "../platforms/telegram/adapter.js";`],
      ["src/platforms/telegram/adapter.ts", ""],
    ]);
    expect(checkImports(files).map((v) => v.why)).toEqual([
      "runner may not import platforms (only the wiring may)",
    ]);
  });

  it("fails when the contract imports anything of ours", () => {
    const files = new Map([
      ["src/contract/platform.ts", `export type { Config } from "../config/schema.js";`],
      ["src/config/schema.ts", ""],
    ]);
    expect(checkImports(files).map((v) => v.why)).toEqual([
      "contract may not import config (a higher layer)",
    ]);
  });

  it("fails on a cycle inside one layer, even through type-only imports", () => {
    const files = new Map([
      ["src/runner/a.ts", `import type { B } from "./b.js";\nexport type A = B;`],
      ["src/runner/b.ts", `import type { C } from "./c.js";\nexport type B = C;`],
      ["src/runner/c.ts", `import type { A } from "./a.js";\nexport type C = A;`],
    ]);
    const [violation, ...rest] = checkImports(files);
    expect(rest).toEqual([]);
    expect(violation?.why).toBe(
      "import cycle: src/runner/a.ts → src/runner/b.ts → src/runner/c.ts → src/runner/a.ts",
    );
  });

  it("places a module in its most specific layer", () => {
    expect(layerOf("src/contract/platform.ts")).toBe(0);
    expect(layerOf("src/platforms/telegram/adapter.ts")).toBeGreaterThan(
      layerOf("src/sessions/store.ts"),
    );
    expect(layerOf("src/gateway/gateway.ts")).toBeGreaterThan(layerOf("src/lifecycle/shutdown.ts"));
    expect(layerOf("scripts/x.ts")).toBe(-1);
  });
});
