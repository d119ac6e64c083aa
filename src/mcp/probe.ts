/**
 * Connects to every configured MCP server once and reports what it offers (`keel mcp list`,
 * `keel doctor`): the same code path the gateway uses, without the gateway.
 */
import type { Logger } from "pino";
import type { Config } from "../config/schema.js";
import { McpHub } from "./mcp-hub.js";

export interface McpProbe {
  name: string;
  transport: "stdio" | "http";
  approval: string;
  state: string;
  error: string | null;
  tools: { name: string; readOnly: boolean; description: string }[];
}

/** One probe per configured server (empty when none); never throws for a broken server. */
export async function probeMcpServers(
  config: Config,
  logger: Logger,
  timeoutMs = 20_000,
): Promise<McpProbe[]> {
  const servers = config.mcp.servers;
  if (Object.keys(servers).length === 0) return [];
  const hub = new McpHub({
    servers,
    baseEnv: config.toolEnv,
    cwd: config.cwd,
    logger,
    connectTimeoutMs: timeoutMs,
    callTimeoutMs: timeoutMs,
  });
  hub.start();
  try {
    await hub.firstAttempts(timeoutMs);
    const status = hub.status();
    const tools = hub.tools();
    return Object.entries(servers).map(([name, server]) => ({
      name,
      transport: "url" in server ? "http" : "stdio",
      approval: server.approval,
      state: status[name]?.state ?? "error",
      error: status[name]?.error ?? null,
      tools: tools
        .filter((t) => status[name]?.tools.includes(t.name))
        .map((t) => ({ name: t.name, readOnly: t.readOnly, description: t.description })),
    }));
  } finally {
    await hub.close();
  }
}
