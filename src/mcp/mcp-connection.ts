/**
 * One configured MCP server, supervised: connects (stdio child or Streamable HTTP), lists its
 * tools, and when it fails to start or dies, reports why, drops its tools and tries again with
 * backoff (1 s doubling to 60 s). It never throws into the gateway: a broken server only means
 * its tools are absent, and a call cut off by its death returns an "outcome unknown" result.
 * The SDK is imported only when a server is configured (start-up time).
 */

import type { Stream } from "node:stream";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import type { Logger } from "pino";
import type { Tool, ToolContext, ToolOutput } from "../agent/tools/tool.js";
import type { McpServerConfig } from "../config/schema.js";
import { backoffMs } from "../lib/net.js";
import { modelToolNames } from "./tool-names.js";

export type McpServerState = "connecting" | "connected" | "error" | "stopped";

export interface McpServerStatus {
  state: McpServerState;
  error: string | null;
  /** Model-facing tool names, while connected. */
  tools: string[];
}

export interface McpConnectionOptions {
  name: string;
  config: McpServerConfig;
  /** The scrubbed environment tools run with; a stdio server gets it plus its own `env`. */
  baseEnv: Readonly<Record<string, string>>;
  /** Working folder of a stdio server without its own `cwd`. */
  cwd: string;
  logger: Logger;
  /** Bound on connecting and listing tools. */
  connectTimeoutMs: number;
  /** Bound on one tool call. */
  callTimeoutMs: number;
  backoffBaseMs?: number;
  backoffMaxMs?: number;
}

const STDERR_LINE_MAX_CHARS = 8192;

export class McpConnection {
  private client: Client | null = null;
  private current: McpServerStatus = { state: "connecting", error: null, tools: [] };
  private toolList: Tool[] = [];
  private failures = 0;
  private retryTimer: NodeJS.Timeout | null = null;
  private stopped = false;
  /** Settles when the first connection attempt has finished, however it went. */
  readonly firstAttempt: Promise<void>;
  private settleFirst!: () => void;

  constructor(private readonly options: McpConnectionOptions) {
    this.firstAttempt = new Promise((resolve) => (this.settleFirst = resolve));
  }

  status(): McpServerStatus {
    return { ...this.current, tools: [...this.current.tools] };
  }

  tools(): Tool[] {
    return this.toolList;
  }

  start(): void {
    void this.connect();
  }

  /** Closes the client (a stdio server's process is ended); no retries afterwards. */
  async close(): Promise<void> {
    this.stopped = true;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.retryTimer = null;
    this.toolList = [];
    this.current = { state: "stopped", error: null, tools: [] };
    const client = this.client;
    this.client = null;
    await client?.close().catch(() => {});
  }

  private async connect(): Promise<void> {
    const { name, logger } = this.options;
    this.current = { ...this.current, state: "connecting" };
    try {
      const [{ Client: ClientClass }, transport] = await Promise.all([
        import("@modelcontextprotocol/sdk/client/index.js"),
        this.createTransport(),
      ]);
      const client = new ClientClass({ name: "keel", version: "1" });
      client.onclose = () => this.lost(client, "the server closed the connection");
      await client.connect(transport, { timeout: this.options.connectTimeoutMs });
      if (this.stopped) {
        await client.close().catch(() => {});
        return;
      }
      this.client = client;
      this.toolList = await this.listTools(client);
      this.failures = 0;
      this.current = {
        state: "connected",
        error: null,
        tools: this.toolList.map((t) => t.name),
      };
      logger.info({ server: name, tools: this.toolList.length }, "mcp server connected");
    } catch (err) {
      this.fail(`could not start: ${describe(err)}`);
    } finally {
      this.settleFirst();
    }
  }

  private async createTransport(): Promise<Transport> {
    const { config } = this.options;
    if ("url" in config) {
      const { StreamableHTTPClientTransport } = await import(
        "@modelcontextprotocol/sdk/client/streamableHttp.js"
      );
      return new StreamableHTTPClientTransport(new URL(config.url), {
        requestInit: { headers: config.headers },
      });
    }
    const { StdioClientTransport } = await import("@modelcontextprotocol/sdk/client/stdio.js");
    const transport = new StdioClientTransport({
      command: config.command,
      args: config.args,
      env: { ...this.options.baseEnv, ...config.env },
      cwd: config.cwd ?? this.options.cwd,
      stderr: "pipe",
    });
    this.logStderr(transport);
    return transport;
  }

  /** A stdio server's stderr goes to the log, line by line, capped. */
  private logStderr(transport: { stderr: Stream | null }): void {
    let buffered = "";
    transport.stderr?.on("data", (chunk: Buffer) => {
      buffered += chunk.toString("utf8");
      const lines = buffered.split("\n");
      buffered = lines.pop()?.slice(-STDERR_LINE_MAX_CHARS) ?? "";
      for (const line of lines) {
        if (line.trim()) {
          this.options.logger.debug(
            { server: this.options.name, line: line.slice(0, STDERR_LINE_MAX_CHARS) },
            "mcp server stderr",
          );
        }
      }
    });
  }

  private async listTools(client: Client): Promise<Tool[]> {
    const listed: Awaited<ReturnType<Client["listTools"]>>["tools"] = [];
    let cursor: string | undefined;
    do {
      const page = await client.listTools(cursor ? { cursor } : {}, {
        timeout: this.options.connectTimeoutMs,
      });
      listed.push(...page.tools);
      cursor = page.nextCursor;
    } while (cursor && listed.length < 1000);
    const names = modelToolNames(
      this.options.name,
      listed.map((t) => t.name),
    );
    return listed.map((spec, i) => this.toTool(client, spec, names[i]!));
  }

  private toTool(
    client: Client,
    spec: Awaited<ReturnType<Client["listTools"]>>["tools"][number],
    modelName: string,
  ): Tool {
    const hints = spec.annotations ?? {};
    return {
      name: modelName,
      description: `${spec.description ?? spec.title ?? spec.name} (MCP server ${this.options.name})`,
      parameters: spec.inputSchema as Record<string, unknown>,
      // Only a read-only tool that does not also claim to be destructive is re-run on resume.
      readOnly: hints.readOnlyHint === true && hints.destructiveHint !== true,
      approval: this.options.config.approval,
      execute: (args, context) => this.call(client, spec.name, args, context),
    };
  }

  private async call(
    client: Client,
    tool: string,
    args: unknown,
    context: ToolContext,
  ): Promise<ToolOutput> {
    if (this.client !== client) {
      return {
        output: `MCP server ${this.options.name} is not connected; try again later.`,
        isError: true,
      };
    }
    try {
      const result = await client.callTool(
        { name: tool, arguments: (args ?? {}) as Record<string, unknown> },
        undefined,
        {
          signal: context.signal,
          timeout: this.options.callTimeoutMs,
          resetTimeoutOnProgress: true,
        },
      );
      return { output: resultText(result), isError: result.isError === true };
    } catch (err) {
      if (context.signal.aborted) return { output: "Interrupted.", isError: true };
      const closed = this.client !== client || isConnectionError(err);
      if (closed) this.lost(client, describe(err));
      return {
        output: closed
          ? `MCP server ${this.options.name} stopped during the call (${describe(err)}); its outcome is unknown.`
          : `MCP tool ${tool} failed: ${describe(err)}`,
        isError: true,
      };
    }
  }

  /** The connection behind `client` is gone: tools go away until a reconnect succeeds. */
  private lost(client: Client, why: string): void {
    if (this.stopped || this.client !== client) return;
    this.client = null;
    void client.close().catch(() => {});
    this.fail(`stopped: ${why}`);
  }

  private fail(error: string): void {
    if (this.stopped) return;
    this.toolList = [];
    this.failures += 1;
    const delayMs = backoffMs(
      this.failures,
      this.options.backoffBaseMs ?? 1000,
      this.options.backoffMaxMs ?? 60_000,
    );
    this.current = { state: "error", error: `MCP server ${this.options.name} ${error}`, tools: [] };
    this.options.logger.warn(
      { server: this.options.name, error, retryInMs: delayMs },
      "mcp server unavailable",
    );
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.retryTimer = setTimeout(() => {
      this.retryTimer = null;
      if (!this.stopped) void this.connect();
    }, delayMs);
    this.retryTimer.unref();
  }
}

/** The text a tool result shows the model: its text parts, and a note for other content. */
function resultText(result: Awaited<ReturnType<Client["callTool"]>>): string {
  const content = Array.isArray(result.content) ? result.content : [];
  const parts = content.map(
    (part: { type: string; text?: string; resource?: { text?: string } }) => {
      if (part.type === "text") return part.text ?? "";
      if (part.type === "resource" && part.resource?.text) return part.resource.text;
      return `[${part.type} content]`;
    },
  );
  if (parts.length === 0 && result.structuredContent !== undefined) {
    return JSON.stringify(result.structuredContent);
  }
  return parts.join("\n");
}

function isConnectionError(err: unknown): boolean {
  const code = (err as { code?: unknown }).code;
  // -32000 is the SDK's ConnectionClosed; fetch failures have no JSON-RPC code.
  return code === -32000 || typeof code !== "number";
}

function describe(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
