/** `keel mcp list`: each configured MCP server, whether it starts, and the tools it gives the agent. */

import { mkdirSync } from "node:fs";
import type { Command } from "commander";
import pino from "pino";
import { probeMcpServers } from "../mcp/probe.js";
import type { CommandContext } from "./command-context.js";
import { type CliIo, EXIT } from "./io.js";
import { type GlobalOptions, loadForCommand } from "./load.js";

export function registerMcpCommands(program: Command, { io, global, run }: CommandContext): void {
  const mcp = program.command("mcp").description("MCP servers whose tools the agent may call");
  mcp
    .command("list")
    .description("start each configured server once and list its tools")
    .option("--json", "machine-readable output")
    .action((opts: { json?: boolean }) => run(() => mcpList({ ...global(), ...opts }, io)));
}

export async function mcpList(
  options: GlobalOptions & { json?: boolean },
  io: CliIo,
): Promise<number> {
  const loaded = loadForCommand(options, io);
  if (!loaded.ok) return loaded.code;
  const { config } = loaded.loaded;
  mkdirSync(config.cwd, { recursive: true });
  const probes = await probeMcpServers(config, pino({ level: "silent" }));
  if (options.json) {
    io.out(JSON.stringify(probes, null, 2));
  } else if (probes.length === 0) {
    io.out("No MCP servers configured (mcp.servers in config.yaml).");
  } else {
    for (const p of probes) {
      const head = `${p.name} (${p.transport}, approval: ${p.approval}): ${p.state}`;
      io.out(p.error ? `${head}: ${p.error}` : head);
      for (const t of p.tools)
        io.out(`  ${t.name}${t.readOnly ? " [read-only]" : ""}  ${t.description}`);
    }
  }
  return probes.some((p) => p.state !== "connected") ? EXIT.failure : EXIT.ok;
}
