import type { ToolCall, ToolRegistry, ToolSpec } from "../types.js";
import { errorText, toolError } from "./define-tool.js";
import type { Tool, ToolContext, ToolOutput } from "./tool.js";

/**
 * Creates the registry of the tools a turn may call: the built-in `tools`, plus those `dynamic`
 * returns at the moment of each lookup (MCP servers' tools, which come and go with their
 * servers; a built-in name always wins). Throws at creation if two built-in tools share a name
 * (a wiring bug); `run` never throws.
 */
export function createToolRegistry(tools: Tool[], dynamic?: () => Tool[]): ToolRegistry {
  const byName = new Map<string, Tool>();
  for (const tool of tools) {
    if (byName.has(tool.name)) throw new Error(`Two tools are named ${tool.name}`);
    byName.set(tool.name, tool);
  }
  const all = (): Tool[] => {
    const extra = dynamic?.().filter((tool) => !byName.has(tool.name)) ?? [];
    return [...byName.values(), ...extra];
  };
  const get = (name: string) => byName.get(name) ?? dynamic?.().find((t) => t.name === name);
  // One spec object per tool for the tool's life: the prompt-size estimate measures each object
  // once (context/token-gauge.ts) instead of every tool schema on every model call.
  const specOf = new WeakMap<Tool, ToolSpec>();
  const spec = (tool: Tool): ToolSpec => {
    let made = specOf.get(tool);
    if (!made) {
      made = {
        type: "function",
        function: { name: tool.name, description: tool.description, parameters: tool.parameters },
      };
      specOf.set(tool, made);
    }
    return made;
  };
  return {
    get,
    specs(): ToolSpec[] {
      return all().map(spec);
    },
    async run(call: ToolCall, context: ToolContext): Promise<ToolOutput> {
      const tool = get(call.function.name);
      if (!tool) {
        const known = all()
          .map((t) => t.name)
          .join(", ");
        return toolError(`Unknown tool ${call.function.name}. Available tools: ${known}.`);
      }
      let args: unknown;
      try {
        args = JSON.parse(call.function.arguments || "{}");
      } catch {
        return toolError(`The arguments for ${tool.name} are not valid JSON; send a JSON object.`);
      }
      try {
        return await tool.execute(args, context);
      } catch (error) {
        return toolError(`${tool.name} failed: ${errorText(error)}`);
      }
    },
  };
}
