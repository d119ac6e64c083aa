/**
 * `keel gateway start|status|restart|stop|drain|install` from the outside: the BUILT command line
 * drives a real background gateway in a temporary home folder. `HOME` points into the temporary
 * folder too, so no installed systemd unit or launchd agent of the developer is ever used.
 */
import { randomUUID } from "node:crypto";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { type AddressInfo, createServer, type Server, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { MALLOC_TUNABLES_VALUE } from "../../src/lib/malloc-tunables.js";
import { type FakeOpenAI, startFakeOpenAI } from "../fakes/openai-server.js";
import {
  isAlive as alive,
  freePort,
  killQuietly as kill,
  type RunKeelResult,
  readGatewayPid,
  runKeel,
} from "../helpers/gateway-process.js";
import { waitFor } from "../helpers/wait-for.js";

interface StatusJson {
  running: boolean;
  pid: number | null;
  gateway_state: string;
  uptime_seconds: number | null;
  active_turns: number;
  draining: boolean;
  platforms: Record<string, { state: string; error: string | null }>;
  source: "api" | "files";
  recorded_state: string | null;
}

let root: string;
let home: string;
let port: number;
let fake: FakeOpenAI;
/** Every gateway pid seen, so afterEach can kill any that a failed test left behind. */
let seenPids: Set<number>;
/** Marks every process this test starts (see processesMarked). */
const RUN_MARKER = "KEEL_E2E_RUN_ID";
let runId: string;

beforeEach(async () => {
  root = mkdtempSync(join(tmpdir(), "keel-e2e-cli-"));
  home = join(root, "keel");
  port = await freePort();
  fake = await startFakeOpenAI();
  seenPids = new Set();
  runId = randomUUID();
});

afterEach(async () => {
  const pid = readPid();
  if (pid !== null) seenPids.add(pid);
  // Also whatever else runs for this home: a restart helper that outlived a failed test would
  // otherwise start a successor after the cleanup.
  for (const p of processesMarked(runId)) seenPids.add(p);
  for (const p of seenPids) kill(p, "SIGKILL");
  await waitFor(
    () => {
      for (const p of processesMarked(runId)) kill(p, "SIGKILL");
      return [...seenPids, ...processesMarked(runId)].every((p) => !alive(p));
    },
    { timeoutMs: 5000, message: "gateways killed" },
  );
  await fake.close();
  rmSync(root, { recursive: true, force: true });
});

/**
 * Pids of processes this test started, directly or through what it started (a detached
 * gateway, a restart helper, a successor): each inherits `RUN_MARKER=<runId>` in its
 * environment. Unrelated processes never carry it, whatever their command line says.
 */
function processesMarked(id: string): number[] {
  if (!existsSync("/proc/self/environ")) return [];
  const needle = `\0${RUN_MARKER}=${id}\0`;
  const pids: number[] = [];
  for (const entry of readdirSync("/proc")) {
    const pid = Number(entry);
    if (!Number.isInteger(pid) || pid === process.pid) continue;
    try {
      if (`\0${readFileSync(`/proc/${pid}/environ`, "utf8")}`.includes(needle) && alive(pid))
        pids.push(pid);
    } catch {
      // Exited meanwhile, or not ours to read.
    }
  }
  return pids;
}

/** A running process's environment, from /proc. */
function environOf(pid: number): Record<string, string> {
  const pairs = readFileSync(`/proc/${pid}/environ`, "utf8").split("\0").filter(Boolean);
  return Object.fromEntries(
    pairs.map((pair) => [pair.slice(0, pair.indexOf("=")), pair.slice(pair.indexOf("=") + 1)]),
  );
}

function readPid(): number | null {
  return readGatewayPid(home)?.pid ?? null;
}

function readState(): { pid: number; gateway_state: string } | null {
  const file = join(home, "gateway_state.json");
  return existsSync(file) ? JSON.parse(readFileSync(file, "utf8")) : null;
}

async function keel(args: string[], env: Record<string, string> = {}): Promise<RunKeelResult> {
  const result = await runKeel({
    home,
    args,
    env: {
      HOME: root,
      [RUN_MARKER]: runId,
      KEEL_HTTP_PORT: String(port),
      OPENAI_BASE_URL: fake.baseUrl,
      KEEL_MODEL: "fake-model",
      ...env,
    },
    timeoutMs: 25_000,
  });
  const pid = readPid();
  if (pid !== null) seenPids.add(pid);
  return result;
}

async function status(): Promise<{ code: number | null; json: StatusJson }> {
  const result = await keel(["gateway", "status", "--json"]);
  return { code: result.code, json: JSON.parse(result.stdout) as StatusJson };
}

async function readyz(): Promise<number> {
  const res = await fetch(`http://127.0.0.1:${port}/readyz`);
  await res.body?.cancel();
  return res.status;
}

describe("keel gateway start/status/restart/stop", () => {
  it("starts in the background, restarts into a new pid, and stops planned", async () => {
    const started = await keel(["gateway", "start"]);
    expect(started.code, started.stderr).toBe(0);
    expect(started.stdout).toMatch(/Gateway started \(pid \d+\) at http:\/\/127\.0\.0\.1:\d+/);
    expect(await readyz()).toBe(200);

    const first = await status();
    expect(first.code).toBe(0);
    expect(first.json).toMatchObject({
      running: true,
      gateway_state: "running",
      draining: false,
      active_turns: 0,
      source: "api",
    });
    expect(first.json.pid).toBe(readPid());
    expect(Object.keys(first.json.platforms).sort()).toEqual(["api", "webchat"]);
    const oldPid = first.json.pid as number;
    // The gateways Keel starts itself get its malloc settings (src/lib/malloc-tunables.ts).
    expect(environOf(oldPid).GLIBC_TUNABLES).toBe(MALLOC_TUNABLES_VALUE);

    const restarted = await keel(["gateway", "restart", "--timeout", "30"]);
    expect(restarted.code, restarted.stderr).toBe(0);
    const second = await status();
    expect(second.json.running).toBe(true);
    expect(second.json.pid).not.toBe(oldPid);
    expect(restarted.stdout).toContain(`-> ${second.json.pid})`);
    expect(alive(oldPid)).toBe(false);
    expect(await readyz()).toBe(200);

    const newPid = second.json.pid as number;
    expect(environOf(newPid).GLIBC_TUNABLES).toBe(MALLOC_TUNABLES_VALUE);
    const stopped = await keel(["gateway", "stop"]);
    expect(stopped.code, stopped.stderr).toBe(0);
    expect(stopped.stdout).toContain(`Gateway stopped (pid ${newPid})`);
    expect(alive(newPid)).toBe(false);
    expect(existsSync(join(home, "gateway.pid"))).toBe(false);
    expect(readState()).toMatchObject({ pid: newPid, gateway_state: "stopped" });

    const after = await status();
    expect(after.code).toBe(3);
    expect(after.json).toMatchObject({
      running: false,
      pid: null,
      gateway_state: "stopped",
      recorded_state: "stopped",
    });
  });

  it("start prints the login link to its terminal, and no log file holds the token", async () => {
    const started = await keel(["gateway", "start"]);
    expect(started.code, started.stderr).toBe(0);
    const token = readFileSync(join(home, "control_token"), "utf8").trim();
    expect(started.stdout).toContain(`Login: http://127.0.0.1:${port}/?token=${token}`);
    // A restart's successor writes to the same output log.
    const restarted = await keel(["gateway", "restart", "--timeout", "30"]);
    expect(restarted.code, restarted.stderr).toBe(0);
    const logs = join(home, "logs");
    const files = readdirSync(logs, { recursive: true, encoding: "utf8" }).filter((name) =>
      statSync(join(logs, name)).isFile(),
    );
    expect(files).toContain("gateway.out.log");
    for (const name of files) {
      expect(readFileSync(join(logs, name), "utf8"), name).not.toContain(token);
    }
    const out = readFileSync(join(logs, "gateway.out.log"), "utf8");
    expect(out).toContain("run `keel open` for the browser login link");
  });

  it("says so and exits 0 when started twice; drain and cancel show in the status", async () => {
    expect((await keel(["gateway", "start"])).code).toBe(0);
    const pid = readPid();
    const again = await keel(["gateway", "start"]);
    expect(again.code).toBe(0);
    expect(again.stdout).toContain(`Gateway already running (pid ${pid})`);
    expect(readPid()).toBe(pid);

    const drain = await keel(["gateway", "drain"]);
    expect(drain.code, drain.stderr).toBe(0);
    expect(drain.stdout).toContain("draining");
    expect((await status()).json).toMatchObject({ running: true, draining: true });
    expect(await readyz()).toBe(503);
    expect(existsSync(join(home, ".drain_request.json"))).toBe(true);

    const cancel = await keel(["gateway", "drain", "--cancel"]);
    expect(cancel.code, cancel.stderr).toBe(0);
    expect(cancel.stdout).toContain("Drain cancelled");
    expect((await status()).json).toMatchObject({ running: true, draining: false });
    expect(await readyz()).toBe(200);
    expect(existsSync(join(home, ".drain_request.json"))).toBe(false);
  });

  it("resumes a turn cut off by the restart in the new process", async () => {
    fake.script([{ hang: true }]);
    expect((await keel(["gateway", "start"])).code).toBe(0);
    const oldPid = readPid();
    const token = readFileSync(join(home, "control_token"), "utf8").trim();
    const cutOff = fetch(`http://127.0.0.1:${port}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
      body: JSON.stringify({ model: "fake-model", messages: [{ role: "user", content: "hi" }] }),
    }).catch(() => null);
    await waitFor(() => fake.requests.length === 1, { message: "the first model call" });
    expect((await status()).json.active_turns).toBe(1);

    const restarted = await keel(["gateway", "restart", "--timeout", "30"]);
    expect(restarted.code, restarted.stderr).toBe(0);
    expect(readPid()).not.toBe(oldPid);
    await cutOff;
    // The new process calls the model again for the interrupted session and stores the reply.
    await waitFor(() => fake.requests.length >= 2, { timeoutMs: 10_000, message: "resumed" });
    const transcript = await waitFor(
      async () => {
        const res = await fetch(`http://127.0.0.1:${port}/api/sessions`, {
          headers: { authorization: `Bearer ${token}` },
        });
        const body = (await res.json()) as {
          sessions: Array<{ session_id: string; message_count: number; resume_pending: boolean }>;
        };
        const session = body.sessions.find((s) => s.message_count >= 2 && !s.resume_pending);
        return session ?? null;
      },
      { timeoutMs: 10_000, message: "the resumed reply stored" },
    );
    expect(transcript.resume_pending).toBe(false);
  });
});

describe("keel gateway commands when config.yaml breaks under a running gateway", () => {
  it("status, drain, open and stop work from the home's files; restart and start exit 78", async () => {
    // The port is in the file only: once the file is broken, the commands find it recorded.
    mkdirSync(home, { recursive: true, mode: 0o700 });
    writeFileSync(join(home, "config.yaml"), `http:\n  port: ${port}\n`);
    const noPortEnv = { KEEL_HTTP_PORT: "" };
    const started = await keel(["gateway", "start"], noPortEnv);
    expect(started.code, started.stderr).toBe(0);
    const pid = readPid()!;
    writeFileSync(
      join(home, "config.yaml"),
      `http:\n  port: ${port}\nagnet:\n  max_iterations: 5\n`,
    );

    const shown = await keel(["gateway", "status"], noPortEnv);
    expect(shown.code, shown.stderr).toBe(0);
    expect(shown.stdout).toContain(`pid ${pid}`);
    expect(shown.stderr).toMatch(/^warning: the config does not load/);
    expect(shown.stderr).toContain("agnet");
    const json = await keel(["gateway", "status", "--json"], noPortEnv);
    expect(json.code).toBe(0);
    // Through the control API: the recorded port and the home's control token reached it.
    expect(JSON.parse(json.stdout)).toMatchObject({ running: true, pid, source: "api" });

    const restart = await keel(["gateway", "restart"], noPortEnv);
    expect(restart.code).toBe(78);
    expect(restart.stderr).toContain(`The running one (pid ${pid}) is left as it is`);
    expect(alive(pid)).toBe(true);

    const drain = await keel(["gateway", "drain"], noPortEnv);
    expect(drain.code, drain.stderr).toBe(0);
    expect(drain.stdout).toContain("Gateway draining");
    expect(await readyz()).toBe(503);
    const cancel = await keel(["gateway", "drain", "--cancel"], noPortEnv);
    expect(cancel.code, cancel.stderr).toBe(0);
    expect(cancel.stdout).toContain("Drain cancelled");

    const open = await keel(["open", "--no-browser"], noPortEnv);
    expect(open.code, open.stderr).toBe(0);
    const token = readFileSync(join(home, "control_token"), "utf8").trim();
    expect(open.stdout.trim()).toBe(`http://127.0.0.1:${port}/?token=${token}`);

    const stopped = await keel(["gateway", "stop"], noPortEnv);
    expect(stopped.code, stopped.stderr).toBe(0);
    expect(stopped.stdout).toContain(`Gateway stopped (pid ${pid})`);
    expect(alive(pid)).toBe(false);

    const start = await keel(["gateway", "start"], noPortEnv);
    expect(start.code).toBe(78);
    expect(start.stderr).toContain("agnet");
    expect(readPid()).toBeNull();
  });
});

describe("keel gateway commands without a running gateway", () => {
  it("stop says not running and exits 0; status exits 3; drain writes and removes the marker", async () => {
    const stop = await keel(["gateway", "stop"]);
    expect(stop.code).toBe(0);
    expect(stop.stdout).toContain("not running");

    const { code, json } = await status();
    expect(code).toBe(3);
    expect(json).toEqual({
      running: false,
      pid: null,
      gateway_state: "stopped",
      uptime_seconds: null,
      active_turns: 0,
      draining: false,
      platforms: {},
      source: "files",
      recorded_state: null,
    });

    const drain = await keel(["gateway", "drain"]);
    expect(drain.code).toBe(0);
    expect(drain.stdout).toContain("next start begins drained");
    expect(existsSync(join(home, ".drain_request.json"))).toBe(true);
    expect((await status()).json.draining).toBe(true);

    const cancel = await keel(["gateway", "drain", "--cancel"]);
    expect(cancel.code).toBe(0);
    expect(existsSync(join(home, ".drain_request.json"))).toBe(false);
  });

  it("start exits 1 with the log tail when the gateway dies while starting", async () => {
    // A state.db that is not a database: the config is fine, the gateway process dies opening it.
    mkdirSync(home, { recursive: true, mode: 0o700 });
    writeFileSync(join(home, "state.db"), "this is not a SQLite database\n".repeat(20));
    const started = await keel(["gateway", "start", "--timeout", "20"]);
    expect(started.code).toBe(1);
    expect(started.stderr).toMatch(/exited with code 1 while starting/);
    expect(started.stderr).toContain("gateway.out.log");
    expect(started.stderr).toMatch(/not a database/);
  });

  it("start refuses at once when another program holds the port, and starts nothing", async () => {
    // The blocker takes a port of its own (a port picked earlier and released may be taken
    // meanwhile), and a failed listen fails the test instead of hanging it.
    const held = new Set<Socket>();
    const blocker: Server = createServer((socket) => {
      held.add(socket.on("error", () => {}).resume());
    });
    await new Promise<void>((done, fail) => {
      blocker.once("error", fail);
      blocker.listen(0, "127.0.0.1", done);
    });
    port = (blocker.address() as AddressInfo).port;
    try {
      const started = await keel(["gateway", "start", "--timeout", "20"]);
      expect(started.code).toBe(1);
      expect(started.stderr).toContain(
        `127.0.0.1:${port} is taken by another program (EADDRINUSE)`,
      );
      expect(started.stdout).not.toMatch(/Gateway started/);
      expect(existsSync(join(home, "logs", "gateway.out.log"))).toBe(false);
      expect(readPid()).toBeNull();
    } finally {
      for (const socket of held) socket.destroy();
      await new Promise<void>((done) => blocker.close(() => done()));
    }
  });

  it("start refuses a bad --timeout with exit 2", async () => {
    const started = await keel(["gateway", "start", "--timeout", "soon"]);
    expect(started.code).toBe(2);
    expect(started.stderr).toContain("--timeout");
    expect(readPid()).toBeNull();
  });

  it("install --dry-run prints a unit whose stop timeout follows the drain, and writes nothing", async () => {
    const result = await keel(["gateway", "install", "--dry-run"], {
      KEEL_RESTART_DRAIN_TIMEOUT: "45",
    });
    expect(result.code, result.stderr).toBe(0);
    const lines = result.stdout.split("\n");
    expect(lines).toContain("TimeoutStopSec=75");
    expect(lines.find((l) => l.startsWith("ExecStart="))).toContain(`gateway run --home ${home}`);
    expect(result.stdout).toContain("systemctl --user enable keel-gateway.service");
    expect(existsSync(join(root, ".config"))).toBe(false);
  });
});
