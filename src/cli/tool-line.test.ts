import { describe, expect, it } from "vitest";
import { toolLine } from "./tool-line.js";

describe("toolLine", () => {
  it("shows the command of a terminal call and the path of a file call", () => {
    expect(toolLine("terminal", JSON.stringify({ command: "ls -la", timeout: 5 }))).toBe(
      "⚙ terminal: ls -la",
    );
    expect(
      toolLine("write_file", JSON.stringify({ path: "a.txt", content: "x".repeat(500) })),
    ).toBe("⚙ write_file: a.txt");
  });

  it("folds a multi-line command onto one line and shortens a long one", () => {
    expect(toolLine("terminal", JSON.stringify({ command: "cd /tmp\nls" }))).toBe(
      "⚙ terminal: cd /tmp ls",
    );
    const line = toolLine("terminal", JSON.stringify({ command: "echo ".repeat(50) }));
    expect(line.length).toBeLessThanOrEqual("⚙ terminal: ".length + 100);
    expect(line.endsWith("…")).toBe(true);
  });

  it("falls back to the arguments as sent: other JSON, nothing, or not JSON at all", () => {
    expect(toolLine("mcp__x", JSON.stringify({ n: 1 }))).toBe('⚙ mcp__x: {"n":1}');
    expect(toolLine("list", "{}")).toBe("⚙ list");
    expect(toolLine("terminal", "{not json")).toBe("⚙ terminal: {not json");
  });
});
