import { beforeAll, describe, expect, it } from "vitest";
import type { Tool } from "../agent/tools/tool.js";
import { type ApprovalMode, approvalNeed, createApprovalPolicy } from "./policy.js";
import { loadShellParser, type ShellParser } from "./shell-syntax.js";

let shell: ShellParser;
beforeAll(async () => {
  shell = await loadShellParser();
});

const terminal: Tool = {
  name: "terminal",
  description: "",
  parameters: {},
  readOnly: false,
  execute: async () => ({ output: "" }) as never,
};

function need(mode: ApprovalMode, command: string) {
  const policy = createApprovalPolicy({
    approval: mode,
    dangerous_patterns: [],
    allow_patterns: [],
  });
  const call = {
    id: "c1",
    type: "function" as const,
    function: { name: "terminal", arguments: JSON.stringify({ command }) },
  };
  return approvalNeed(policy, call, terminal, shell);
}

describe("what approve_session grants", () => {
  it("in always mode, read-only programs by subcommand: git status never covers git push --force", () => {
    expect(need("always", "git status --short")?.grants).toEqual(["terminal:cmd:git status"]);
    expect(need("always", "git status")?.grants).toEqual(["terminal:cmd:git status"]);
    const push = need("always", "git push --force origin main")!.grants;
    expect(push).toContain("terminal:cmd:git push --force origin main");
    expect(push).not.toContain("terminal:cmd:git status");
    expect(need("always", "git push origin main")?.grants).toEqual([
      "terminal:cmd:git push origin main",
    ]);
  });

  it("in always mode, every simple command of a list must be granted by itself", () => {
    expect(need("always", "ls -la && make build > out.log")?.grants).toEqual([
      "terminal:cmd:> out.log",
      "terminal:cmd:ls",
      "terminal:cmd:make build",
    ]);
  });

  it("in dangerous mode, the normalized simple commands that were dangerous", () => {
    expect(need("dangerous", "cd x && 'rm' -rf   build; echo done")?.grants).toEqual([
      "terminal:cmd:rm -rf build",
    ]);
    expect(need("dangerous", "echo ok")).toBeNull();
  });

  it("shows the command whole, however long", () => {
    const long = `echo ${"a".repeat(5000)}; rm -rf /srv`;
    expect(need("dangerous", long)?.summary).toBe(long);
  });

  it("asks about every command when the shell grammar is missing", () => {
    const policy = createApprovalPolicy({
      approval: "dangerous",
      dangerous_patterns: [],
      allow_patterns: [],
    });
    const call = {
      id: "c1",
      type: "function" as const,
      function: { name: "terminal", arguments: JSON.stringify({ command: "ls" }) },
    };
    expect(approvalNeed(policy, call, terminal, null)?.rule).toBe("terminal:unparsed");
  });
});
