import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createHomeGuard } from "./home-guard.js";
import { createReadFileTool } from "./read-file.js";
import type { Tool } from "./tool.js";
import { createWriteFileTool } from "./write-file.js";

let root: string;
let home: string;
let workspace: string;
let outside: string;
let readFile: Tool;
let writeFile: Tool;
const signal = new AbortController().signal;

beforeEach(() => {
  root = mkdtempSync(join(tmpdir(), "keel-guard-"));
  home = join(root, "home");
  workspace = join(home, "workspace");
  outside = join(root, "elsewhere");
  mkdirSync(workspace, { recursive: true });
  mkdirSync(outside);
  writeFileSync(join(home, "control_token"), "the-control-token\n");
  writeFileSync(join(home, "config.yaml"), "model:\n  api_key: sk-config\n");
  writeFileSync(join(home, "state.db"), "SQLite format 3");
  mkdirSync(join(home, "logs"));
  const guard = createHomeGuard(home);
  readFile = createReadFileTool({ guard });
  writeFile = createWriteFileTool({ guard });
});

afterEach(() => {
  rmSync(root, { recursive: true, force: true });
});

const read = (path: string, cwd = workspace) => readFile.execute({ path }, { cwd, signal });
const write = (path: string, content: string, cwd = workspace) =>
  writeFile.execute({ path, content }, { cwd, signal });

function expectRefused(result: { output: string; isError: boolean }): void {
  expect(result.isError).toBe(true);
  expect(result.output).toMatch(/^Refused: .* is inside the Keel home/);
}

describe("the file tools and the Keel home", () => {
  it("refuse ../control_token, workspace/../config.yaml and an absolute path to state.db", async () => {
    for (const path of [
      "../control_token",
      "../workspace/../config.yaml",
      join(home, "state.db"),
    ]) {
      const result = await read(path);
      expectRefused(result);
      expect(result.output).not.toContain("the-control-token");
    }
    expectRefused(await write("../control_token", "mine"));
    expectRefused(await write(join(home, "logs", "gateway.log"), "forged"));
    expect(readFileSync(join(home, "control_token"), "utf8")).toBe("the-control-token\n");
  });

  it("refuse a symlink in the workspace that points into the home, for reading and writing", async () => {
    symlinkSync(join(home, "config.yaml"), join(workspace, "innocent.txt"));
    symlinkSync(home, join(workspace, "up"));
    expectRefused(await read("innocent.txt"));
    expectRefused(await read("up/control_token"));
    expectRefused(await write("innocent.txt", "model: {}\n"));
    expectRefused(await write("up/new-folder/file.txt", "x"));
    expect(readFileSync(join(home, "config.yaml"), "utf8")).toContain("sk-config");
  });

  it("refuse writing through a dangling symlink whose target would be in the home", async () => {
    symlinkSync(join(home, "planted.txt"), join(workspace, "dangling"));
    expectRefused(await write("dangling", "x"));
    expect(() => readFileSync(join(home, "planted.txt"))).toThrow();
  });

  it("allow the workspace and everything outside the home", async () => {
    expect(await write("notes/a.md", "hello")).toMatchObject({ isError: false });
    expect(await read("notes/a.md")).toEqual({ output: "hello", isError: false });
    writeFileSync(join(outside, "b.txt"), "outside");
    symlinkSync(join(outside, "b.txt"), join(workspace, "link-out"));
    expect(await read("link-out")).toEqual({ output: "outside", isError: false });
    expect(await read(join(outside, "b.txt"))).toEqual({ output: "outside", isError: false });
  });

  it("stay closed when workspace/ is replaced by a link to the home, or above it", async () => {
    rmSync(workspace, { recursive: true });
    for (const target of [".", ".."]) {
      rmSync(workspace, { force: true });
      symlinkSync(target, workspace);
      // A fresh guard, as after a restart: it resolves the workspace anew.
      const guard = createHomeGuard(home);
      const tools = [createReadFileTool({ guard }), createWriteFileTool({ guard })] as const;
      for (const path of [join(home, "control_token"), join(home, "state.db")]) {
        expectRefused(await tools[0].execute({ path }, { cwd: outside, signal }));
      }
      const path = join(home, "config.yaml");
      expectRefused(await tools[1].execute({ path, content: "x" }, { cwd: outside, signal }));
    }
    expect(readFileSync(join(home, "config.yaml"), "utf8")).toContain("sk-config");
  });

  it("still protect the home when agent.cwd is elsewhere", async () => {
    expectRefused(await read(join(home, "control_token"), outside));
    expectRefused(await read("../home/config.yaml", outside));
    expect(await write("c.txt", "fine", outside)).toMatchObject({ isError: false });
    expect(await read(join(workspace, "..", "workspace", "x"), outside)).toEqual({
      output: `File not found: ${join(workspace, "..", "workspace", "x")}`,
      isError: true,
    });
  });
});
