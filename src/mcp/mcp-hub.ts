/**
 * Every configured MCP server (`mcp.servers`), each supervised on its own (mcp-connection.ts):
 * one failing server never takes the others or the gateway down. The agent's tool registry asks
 * `tools()` on each turn, so tools come and go with their servers.
 */
import type { Logger } from "pino";
import type { Tool } from "../agent/tools/tool.js";
import type { McpServerConfig } from "../config/schema.js";
import { McpConnection, type McpServerStatus } from "./mcp-connection.js";

export interface McpHubOptions {
  servers: Readonly<Record<string, McpServerConfig>>;
  baseEnv: Readonly<Record<string, string>>;
  cwd: string;
  logger: Logger;
  connectTimeoutMs?: number;
  callTimeoutMs: number;
  backoffBaseMs?: number;
}

export class McpHub {
  private readonly connections = new Map<string, McpConnection>();

  constructor(options: McpHubOptions) {
    for (const [name, config] of Object.entries(options.servers)) {
      this.connections.set(
        name,
        new McpConnection({
          name,
          config,
          baseEnv: options.baseEnv,
          cwd: options.cwd,
          logger: options.logger,
          connectTimeoutMs: options.connectTimeoutMs ?? 15_000,
          callTimeoutMs: options.callTimeoutMs,
          ...(options.backoffBaseMs !== undefined && { backoffBaseMs: options.backoffBaseMs }),
        }),
      );
    }
  }

  get size(): number {
    return this.connections.size;
  }

  /** Starts connecting every server in the background. */
  start(): void {
    for (const connection of this.connections.values()) connection.start();
  }

  /**
   * Resolves once every server had its first connection attempt, or after `timeoutMs`: a resumed
   * turn then knows which tools are read-only (re-run) and which are not (outcome unknown).
   */
  async firstAttempts(timeoutMs: number): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const bound = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, timeoutMs);
    });
    const all = Promise.all([...this.connections.values()].map((c) => c.firstAttempt));
    await Promise.race([all, bound]);
    clearTimeout(timer);
  }

  /** The tools of every connected server. */
  tools(): Tool[] {
    return [...this.connections.values()].flatMap((c) => c.tools());
  }

  status(): Record<string, McpServerStatus> {
    return Object.fromEntries([...this.connections].map(([name, c]) => [name, c.status()]));
  }

  /** One line per server for `/status`. */
  statusLines(): string[] {
    return Object.entries(this.status()).map(([name, s]) =>
      s.state === "connected"
        ? `MCP ${name}: connected (${s.tools.length} tools)`
        : `MCP ${name}: ${s.state}${s.error ? ` — ${s.error}` : ""}`,
    );
  }

  /** Closes every server (stdio processes end); used at stop. */
  async close(): Promise<void> {
    await Promise.all([...this.connections.values()].map((c) => c.close()));
  }
}
