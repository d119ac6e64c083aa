/**
 * The wait of `keel gateway start|restart`: ready means this home's gateway answers at the
 * address, and a spawned process's exit ends the wait at once. The home's `gateway.pid` names
 * this test process, so it counts as the live gateway; the "address" is a server of the test's.
 */
import { createServer as createHttpServer } from "node:http";
import { type AddressInfo, createServer, type Server, type Socket } from "node:net";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createTempDir } from "../../test/helpers/temp-home.js";
import { acquirePidFile } from "../lifecycle/pid-file.js";
import { type ExitInfo, waitUntilReady } from "./background-gateway.js";

let dir: ReturnType<typeof createTempDir>;
let server: Server | null = null;
const held = new Set<Socket>();

beforeEach(async () => {
  dir = createTempDir();
  const claimed = await acquirePidFile(dir.path, { argv: process.argv, now: Date.now });
  expect(claimed.ok).toBe(true);
});

afterEach(async () => {
  for (const socket of held) socket.destroy();
  held.clear();
  if (server) await new Promise<void>((done) => server?.close(() => done()));
  server = null;
  dir.cleanup();
});

async function listen(s: Server): Promise<number> {
  server = s;
  await new Promise<void>((done, fail) => {
    s.once("error", fail);
    s.listen(0, "127.0.0.1", done);
  });
  return (s.address() as AddressInfo).port;
}

/** An HTTP server that is ready and reports `pid` as its own. */
function gatewayLike(pid: number): Server {
  return createHttpServer((req, res) => {
    res.writeHead(200, { "content-type": "application/json" });
    res.end(req.url === "/api/status" ? JSON.stringify({ pid, draining: false }) : "{}");
  });
}

const target = (port: number) => ({
  home: dir.path,
  http: { host: "127.0.0.1", port },
  controlToken: "t".repeat(24),
});

describe("waitUntilReady", () => {
  it("is ready when the gateway at the address reports this home's pid", async () => {
    const port = await listen(gatewayLike(process.pid));
    const outcome = await waitUntilReady(target(port), { accept: () => true, timeoutMs: 10_000 });
    expect(outcome).toEqual({ kind: "ready", pid: process.pid });
  });

  it("never takes another gateway's ready answer on the same port for this home's", async () => {
    const port = await listen(gatewayLike(process.pid + 1));
    const outcome = await waitUntilReady(target(port), { accept: () => true, timeoutMs: 1500 });
    expect(outcome).toEqual({ kind: "timeout", pid: process.pid });
  });

  it("ends with the spawned process's exit while a probe still hangs on what holds the port", async () => {
    let firstProbe!: (socket: Socket) => void;
    const probed = new Promise<Socket>((resolve) => (firstProbe = resolve));
    const port = await listen(
      createServer((socket) => {
        // Read (and ignore) the request, so the client's hang-up shows as "close".
        held.add(socket.on("error", () => {}).resume());
        firstProbe(socket);
      }),
    );
    let exit!: (info: ExitInfo) => void;
    const exited = new Promise<ExitInfo>((resolve) => (exit = resolve));
    const waiting = waitUntilReady(target(port), { accept: () => true, exited, timeoutMs: 60_000 });
    const socket = await probed;
    const probeGaveUp = new Promise<"probe gave up">((resolve) =>
      socket.once("close", () => resolve("probe gave up")),
    );
    exit({ code: 1, signal: null });
    const first = await Promise.race([waiting, probeGaveUp]);
    expect(first).toEqual({ kind: "exited", exit: { code: 1, signal: null } });
  });
});
