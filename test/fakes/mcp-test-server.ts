/**
 * A small MCP server for tests, built with the SDK's own server classes. Run it over stdio
 * (`node --import tsx test/fakes/mcp-test-server.ts`, as a gateway would spawn it), or serve it
 * over Streamable HTTP on 127.0.0.1 from a test with `startHttpMcpServer()`.
 *
 * Tools: `lookup` (read-only), `record` (side effects), `crash` (the process dies mid-call).
 * Every call first appends a line to the ledger file (`MCP_LEDGER`), so a test counts how often a
 * call really ran. `ms` delays the answer, but only the first time the same line is seen: a call
 * re-run after a crash answers at once.
 */
import { appendFileSync, existsSync, readFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { fileURLToPath } from "node:url";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { z } from "zod";

/** The command line that runs this file as a stdio MCP server (`node` + these, in STDIO_SERVER_CWD). */
export const STDIO_SERVER_ARGS = ["--import", "tsx", fileURLToPath(import.meta.url)];
/** Where `--import tsx` resolves: the repository root. */
export const STDIO_SERVER_CWD = fileURLToPath(new URL("../..", import.meta.url));

export function createTestMcpServer(ledger: string | undefined): McpServer {
  const server = new McpServer({ name: "keel-test", version: "1.0.0" });
  /** Appends `line`; true when it was there already (a re-run). */
  const note = (line: string): boolean => {
    if (!ledger) return false;
    const seen = existsSync(ledger) && readFileSync(ledger, "utf8").split("\n").includes(line);
    appendFileSync(ledger, `${line}\n`);
    return seen;
  };
  const wait = (ms: number | undefined, seen: boolean) =>
    ms && !seen ? new Promise((resolve) => setTimeout(resolve, ms)) : Promise.resolve();

  server.registerTool(
    "lookup",
    {
      description: "Looks a key up (read-only)",
      inputSchema: { key: z.string(), ms: z.number().optional() },
      annotations: { readOnlyHint: true },
    },
    async ({ key, ms }) => {
      await wait(ms, note(`lookup ${key}`));
      return { content: [{ type: "text", text: `value of ${key}` }] };
    },
  );
  server.registerTool(
    "record",
    {
      description: "Records a text (changes things)",
      inputSchema: { text: z.string(), ms: z.number().optional() },
    },
    async ({ text, ms }) => {
      await wait(ms, note(`record ${text}`));
      return { content: [{ type: "text", text: `recorded ${text}` }] };
    },
  );
  server.registerTool(
    "crash",
    { description: "Exits the server process in the middle of the call" },
    async () => {
      note("crash");
      setImmediate(() => process.exit(3));
      return new Promise(() => {});
    },
  );
  return server;
}

export interface HttpMcpServer {
  url: string;
  close(): Promise<void>;
}

/** Serves the test server over Streamable HTTP (stateless) on 127.0.0.1, port 0. */
export async function startHttpMcpServer(ledger?: string): Promise<HttpMcpServer> {
  const http: Server = createServer((req, res) => {
    const server = createTestMcpServer(ledger);
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
    res.on("close", () => {
      void transport.close();
      void server.close();
    });
    server
      .connect(transport)
      .then(() => transport.handleRequest(req, res))
      .catch(() => {
        if (!res.headersSent) res.writeHead(500).end();
      });
  });
  await new Promise<void>((resolve) => http.listen(0, "127.0.0.1", resolve));
  const { port } = http.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    close: () =>
      new Promise((resolve) => {
        http.closeAllConnections();
        http.close(() => resolve());
      }),
  };
}

// Run as a stdio server when executed directly; end with the client (stdin closed).
if (process.argv[1] === fileURLToPath(import.meta.url)) {
  process.stdin.on("end", () => process.exit(0));
  await createTestMcpServer(process.env.MCP_LEDGER).connect(new StdioServerTransport());
}
