import { describe, expect, it } from "vitest";
import { createToolRegistry } from "./index.js";
import { createReadFileTool } from "./read-file.js";
import type { Tool } from "./tool.js";
import { createWriteFileTool } from "./write-file.js";

const context = { cwd: "/", signal: new AbortController().signal };

function call(name: string, args: string) {
  return { id: "call_1", type: "function" as const, function: { name, arguments: args } };
}

const throwing: Tool = {
  name: "explode",
  description: "Always throws",
  parameters: { type: "object" },
  readOnly: true,
  execute: () => Promise.reject(new Error("kaboom")),
};

describe("createToolRegistry", () => {
  it("lists every tool in the OpenAI tools format and finds tools by name", () => {
    const read = createReadFileTool();
    const registry = createToolRegistry([read, createWriteFileTool()]);
    expect(registry.get("read_file")).toBe(read);
    expect(registry.get("nope")).toBeUndefined();
    const specs = registry.specs();
    expect(specs.map((s) => s.function.name)).toEqual(["read_file", "write_file"]);
    expect(specs[0]).toEqual({
      type: "function",
      function: { name: "read_file", description: read.description, parameters: read.parameters },
    });
  });

  it("hands out the same spec object for a tool on every call, so its size is measured once", () => {
    const dynamicTool: Tool = { ...throwing, name: "dynamic_one" };
    const registry = createToolRegistry([createReadFileTool()], () => [dynamicTool]);
    const first = registry.specs();
    const second = registry.specs();
    expect(second).not.toBe(first);
    expect(second).toHaveLength(2);
    for (const [i, spec] of second.entries()) expect(spec).toBe(first[i]);
  });

  it("refuses two tools with the same name", () => {
    expect(() => createToolRegistry([createReadFileTool(), createReadFileTool()])).toThrow(
      /read_file/,
    );
  });

  it("turns unknown tools, unparsable arguments and thrown errors into error results", async () => {
    const registry = createToolRegistry([createReadFileTool(), throwing]);
    expect(await registry.run(call("rm_rf", "{}"), context)).toEqual({
      output: "Unknown tool rm_rf. Available tools: read_file, explode.",
      isError: true,
    });
    const badJson = await registry.run(call("read_file", '{"path": '), context);
    expect(badJson.isError).toBe(true);
    expect(badJson.output).toContain("not valid JSON");
    expect(await registry.run(call("explode", "{}"), context)).toEqual({
      output: "explode failed: kaboom",
      isError: true,
    });
  });
});
