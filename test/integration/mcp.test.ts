/**
 * MCP servers as tools, against real servers written with the SDK: one spawned over stdio, one
 * over Streamable HTTP on 127.0.0.1.
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { Tool } from "../../src/agent/tools/tool.js";
import { McpHub } from "../../src/mcp/mcp-hub.js";
import { modelToolNames } from "../../src/mcp/tool-names.js";
import {
  type HttpMcpServer,
  STDIO_SERVER_ARGS,
  STDIO_SERVER_CWD,
  startHttpMcpServer,
} from "../fakes/mcp-test-server.js";
import { createMemoryLogger } from "../helpers/memory-logger.js";
import { createTempDir } from "../helpers/temp-home.js";
import { waitFor } from "../helpers/wait-for.js";

describe("MCP servers as tools", () => {
  let dir: ReturnType<typeof createTempDir>;
  let http: HttpMcpServer;
  let hub: McpHub | null = null;

  beforeEach(async () => {
    dir = createTempDir("keel-mcp-");
    http = await startHttpMcpServer(join(dir.path, "http-ledger.txt"));
  });

  afterEach(async () => {
    await hub?.close();
    hub = null;
    await http.close();
    dir.cleanup();
  });

  const ledger = (name: string) => {
    const path = join(dir.path, name);
    return existsSync(path) ? readFileSync(path, "utf8").split("\n").filter(Boolean) : [];
  };
  const call = (tool: Tool | undefined, args: unknown) =>
    tool!.execute(args, { cwd: dir.path, signal: new AbortController().signal });

  function startHub(servers: ConstructorParameters<typeof McpHub>[0]["servers"]): McpHub {
    hub = new McpHub({
      servers,
      baseEnv: { PATH: process.env.PATH ?? "/usr/bin:/bin" },
      cwd: dir.path,
      logger: createMemoryLogger().logger,
      callTimeoutMs: 20_000,
      backoffBaseMs: 50,
    });
    hub.start();
    return hub;
  }

  const stdio = (approval: "off" | "dangerous" | "always" = "dangerous") => ({
    command: process.execPath,
    args: STDIO_SERVER_ARGS,
    cwd: STDIO_SERVER_CWD,
    env: { MCP_LEDGER: join(dir.path, "stdio-ledger.txt") },
    approval,
  });

  it("lists the tools of a stdio and a Streamable HTTP server as <server>__<tool>, and calls them", async () => {
    const h = startHub({
      local: stdio(),
      remote: { url: http.url, headers: {}, approval: "always" },
    });
    await h.firstAttempts(20_000);
    const byName = new Map(h.tools().map((t) => [t.name, t]));
    expect([...byName.keys()].sort()).toEqual([
      "local__crash",
      "local__lookup",
      "local__record",
      "remote__crash",
      "remote__lookup",
      "remote__record",
    ]);
    expect(byName.get("local__lookup")!.readOnly).toBe(true);
    expect(byName.get("local__record")!.readOnly).toBe(false);
    expect(byName.get("local__record")!.approval).toBe("dangerous");
    expect(byName.get("remote__lookup")!.approval).toBe("always");
    expect(byName.get("local__lookup")!.parameters).toMatchObject({
      type: "object",
      properties: { key: { type: "string" } },
    });

    expect(await call(byName.get("local__record"), { text: "a" })).toEqual({
      output: "recorded a",
      isError: false,
    });
    expect(await call(byName.get("remote__lookup"), { key: "k" })).toEqual({
      output: "value of k",
      isError: false,
    });
    expect(ledger("stdio-ledger.txt")).toEqual(["record a"]);
    expect(ledger("http-ledger.txt")).toEqual(["lookup k"]);
    // The server validates arguments; the model sees its error.
    const bad = await call(byName.get("local__record"), { text: 5 });
    expect(bad.isError).toBe(true);
    expect(h.status().local).toMatchObject({ state: "connected", error: null });
  });

  it("a server that dies mid-call: outcome unknown, tools gone, then back after a retry", async () => {
    const h = startHub({ local: stdio() });
    await h.firstAttempts(20_000);
    const crash = h.tools().find((t) => t.name === "local__crash");
    const result = await call(crash, {});
    expect(result.isError).toBe(true);
    expect(result.output).toMatch(/stopped during the call.*outcome is unknown/);
    expect(h.status().local!.state).not.toBe("connected");
    await waitFor(() => h.status().local?.state === "connected", { timeoutMs: 20_000 });
    expect(h.tools().map((t) => t.name)).toContain("local__record");
    expect(ledger("stdio-ledger.txt")).toEqual(["crash"]);
  });

  it("a server that cannot start is reported with a clear error; the others work", async () => {
    const h = startHub({
      broken: {
        command: join(dir.path, "no-such-server"),
        args: [],
        env: {},
        approval: "dangerous",
      },
      remote: { url: http.url, headers: {}, approval: "dangerous" },
    });
    await h.firstAttempts(20_000);
    const broken = h.status().broken!;
    expect(broken.state).toBe("error");
    expect(broken.error).toMatch(/MCP server broken could not start/);
    expect(h.tools().every((t) => t.name.startsWith("remote__"))).toBe(true);
    expect(h.tools()).toHaveLength(3);
  });

  it("an HTTP server that goes away: the call says so, and the server is retried", async () => {
    const h = startHub({ remote: { url: http.url, headers: {}, approval: "dangerous" } });
    await h.firstAttempts(20_000);
    const lookup = h.tools().find((t) => t.name === "remote__lookup");
    await http.close();
    const result = await call(lookup, { key: "x" });
    expect(result.isError).toBe(true);
    expect(result.output).toMatch(/remote/);
    await waitFor(() => h.status().remote?.state === "error", { timeoutMs: 10_000 });
    expect(h.tools()).toEqual([]);
    http = await startHttpMcpServer();
  });
});

describe("modelToolNames", () => {
  it("sanitises, caps at 64 characters and numbers collisions", () => {
    expect(modelToolNames("fs", ["read file", "read.file", "x".repeat(80)])).toEqual([
      "fs__read-file",
      "fs__read-file-2",
      `fs__${"x".repeat(60)}`,
    ]);
  });
});
