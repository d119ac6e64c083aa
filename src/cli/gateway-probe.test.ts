import { appendFileSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createTempDir } from "../../test/helpers/temp-home.js";
import { acquirePidFile } from "../lifecycle/pid-file.js";
import { defaultRestartTimeoutSeconds, defaultStopTimeoutSeconds } from "./gateway-control.js";
import {
  callControlApi,
  fetchOwnApiStatus,
  fileSize,
  findOwnGateway,
  gatewayBaseUrl,
  parseTimeoutSeconds,
  pollUntil,
  probeReady,
  readLogTail,
  unconfirmedText,
} from "./gateway-probe.js";

describe("gatewayBaseUrl", () => {
  it("reaches wildcard listeners through loopback and brackets IPv6", () => {
    expect(gatewayBaseUrl({ host: "127.0.0.1", port: 8642 })).toBe("http://127.0.0.1:8642");
    expect(gatewayBaseUrl({ host: "0.0.0.0", port: 80 })).toBe("http://127.0.0.1:80");
    expect(gatewayBaseUrl({ host: "::", port: 1 })).toBe("http://[::1]:1");
    expect(gatewayBaseUrl({ host: "::1", port: 2 })).toBe("http://[::1]:2");
  });
});

describe("parseTimeoutSeconds and the default waits", () => {
  it("accepts positive numbers only", () => {
    expect(parseTimeoutSeconds(undefined, 60)).toBe(60);
    expect(parseTimeoutSeconds("2.5", 60)).toBe(2.5);
    expect(parseTimeoutSeconds("0", 60)).toBeNull();
    expect(parseTimeoutSeconds("-3", 60)).toBeNull();
    expect(parseTimeoutSeconds("soon", 60)).toBeNull();
  });

  it("waits drain + 30 s for a stop, and a start on top for a restart", () => {
    expect(defaultStopTimeoutSeconds(0)).toBe(30);
    expect(defaultStopTimeoutSeconds(45)).toBe(75);
    expect(defaultRestartTimeoutSeconds(45)).toBe(135);
  });
});

describe("pollUntil", () => {
  it("returns the first non-null value, or null once the time is up", async () => {
    let calls = 0;
    expect(
      await pollUntil(async () => (++calls >= 3 ? calls : null), {
        timeoutMs: 5000,
        intervalMs: 1,
      }),
    ).toBe(3);
    expect(await pollUntil(async () => null, { timeoutMs: 30, intervalMs: 5 })).toBeNull();
  });
});

describe("readLogTail", () => {
  let dir: ReturnType<typeof createTempDir>;
  beforeEach(() => {
    dir = createTempDir();
  });
  afterEach(() => dir.cleanup());

  it("returns only lines written after the offset, last ones first cut", () => {
    const file = join(dir.path, "out.log");
    writeFileSync(file, "old 1\nold 2\n");
    const offset = fileSize(file);
    appendFileSync(file, "new 1\n\nnew 2\nnew 3\n");
    expect(readLogTail(file, offset, 2)).toEqual(["new 2", "new 3"]);
    expect(readLogTail(file, offset, 10)).toEqual(["new 1", "new 2", "new 3"]);
    expect(readLogTail(join(dir.path, "missing.log"), 0, 5)).toEqual([]);
  });
});

describe("control API calls", () => {
  let server: Server;
  let port: number;
  const seen: Array<{ method?: string; url?: string; auth?: string; body: string }> = [];

  beforeEach(async () => {
    seen.length = 0;
    server = createServer((req, res) => {
      let body = "";
      req.on("data", (chunk) => (body += chunk));
      req.on("end", () => {
        seen.push({ method: req.method, url: req.url, auth: req.headers.authorization, body });
        if (req.url === "/readyz") {
          res.writeHead(503).end("{}");
          return;
        }
        res.writeHead(200, { "content-type": "application/json" });
        res.end(JSON.stringify({ pid: 77, draining: true }));
      });
    });
    await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
    port = (server.address() as AddressInfo).port;
  });
  afterEach(async () => {
    await new Promise<void>((done) => server.close(() => done()));
  });

  const config = () => ({ http: { host: "127.0.0.1", port }, controlToken: "t".repeat(20) });

  it("sends the control token and a JSON body", async () => {
    const answer = await callControlApi(config(), "/api/gateway/drain", {
      method: "POST",
      body: { action: "drain" },
    });
    expect(answer).toEqual({ status: 200, body: { pid: 77, draining: true } });
    expect(seen[0]).toMatchObject({
      method: "POST",
      url: "/api/gateway/drain",
      auth: `Bearer ${"t".repeat(20)}`,
      body: '{"action":"drain"}',
    });
  });

  it("accepts /api/status only from the gateway named by gateway.pid", async () => {
    const mine = { pid: 77, start_time: 0, argv: [] };
    expect((await fetchOwnApiStatus(config(), mine))?.pid).toBe(77);
    expect(await fetchOwnApiStatus(config(), { ...mine, pid: 78 })).toBeNull();
    expect(await fetchOwnApiStatus(config(), null)).toBeNull();
  });

  it("tells not ready from not answering", async () => {
    expect(await probeReady(`http://127.0.0.1:${port}`)).toBe(false);
    await new Promise<void>((done) => server.close(() => done()));
    expect(await probeReady(`http://127.0.0.1:${port}`)).toBeNull();
    expect(await callControlApi(config(), "/api/status")).toBeNull();
    server = createServer().listen(0, "127.0.0.1");
  });
});

describe("findOwnGateway", () => {
  let dir: ReturnType<typeof createTempDir>;
  let server: Server | null = null;
  beforeEach(() => {
    dir = createTempDir();
  });
  afterEach(async () => {
    if (server) await new Promise<void>((done) => server?.close(() => done()));
    server = null;
    dir.cleanup();
  });

  /** A server answering every request with `status` and `body`; returns its port. */
  async function answering(status: number, body: unknown): Promise<number> {
    server = createServer((_req, res) => {
      res.writeHead(status, { "content-type": "application/json" });
      res.end(JSON.stringify(body));
    });
    await new Promise<void>((done) => server?.listen(0, "127.0.0.1", done));
    return (server.address() as AddressInfo).port;
  }
  const target = (port: number) => ({
    home: dir.path,
    http: { host: "127.0.0.1", port },
    controlToken: "t".repeat(20),
  });
  /** This test process plays the home's live gateway. */
  const claim = async () =>
    expect((await acquirePidFile(dir.path, { argv: process.argv, now: Date.now })).ok).toBe(true);

  it("is not running without a live pid file, whatever answers at the port", async () => {
    const port = await answering(200, { pid: process.pid });
    expect(await findOwnGateway(target(port))).toEqual({ state: "not_running" });
  });

  it("is running only when the address reports the pid file's pid", async () => {
    await claim();
    const port = await answering(200, { pid: process.pid, draining: false });
    const own = await findOwnGateway(target(port));
    expect(own.state).toBe("running");
  });

  it("names what answers instead: another pid, a refused token, or nothing", async () => {
    await claim();
    const other = await findOwnGateway(target(await answering(200, { pid: 1 })));
    expect(other).toMatchObject({ state: "unconfirmed", answered: "a gateway with pid 1" });
    if (other.state !== "unconfirmed") throw new Error("unreachable");
    expect(unconfirmedText(other, target(0).http)).toContain("is not the one answering");
    await new Promise<void>((done) => server?.close(() => done()));

    const refused = await findOwnGateway(target(await answering(401, { error: "no" })));
    if (refused.state !== "unconfirmed") throw new Error(`unexpected ${refused.state}`);
    expect(unconfirmedText(refused, target(0).http)).toContain("the control token was refused");
    const port = (server!.address() as AddressInfo).port;
    await new Promise<void>((done) => server?.close(() => done()));
    server = null;

    const silent = await findOwnGateway(target(port));
    expect(silent).toMatchObject({ state: "unconfirmed", answered: null });
  });
});
