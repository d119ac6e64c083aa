/**
 * The lifecycle with the real process: the built CLI (`npm run build` first) started as
 * `node bin/keel.js gateway run --home <tmp>`, a fake model server in this process, signals and
 * marker files as an operator or a service manager would use them.
 */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { writePlannedStop } from "../../src/lifecycle/markers.js";
import { type FakeOpenAI, startFakeOpenAI } from "../fakes/openai-server.js";
import {
  type GatewayProcess,
  isAlive,
  isBuilt,
  killNamedGateway,
  killQuietly,
  readGatewayPid as readPid,
  readGatewayState as readState,
  startGatewayProcess,
} from "../helpers/gateway-process.js";
import { createTempDir } from "../helpers/temp-home.js";
import { waitFor } from "../helpers/wait-for.js";

/** Docker / Podman: the gateway then restarts by exiting 75 instead of spawning a successor. */
const IN_CONTAINER = existsSync("/.dockerenv") || existsSync("/run/.containerenv");

interface ProcInfo {
  pid: number;
  ppid: number;
  pgid: number;
}

function listProcesses(): ProcInfo[] {
  const out: ProcInfo[] = [];
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, "utf8");
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      if (fields[0] === "Z") continue;
      out.push({ pid: Number(name), ppid: Number(fields[1]), pgid: Number(fields[2]) });
    } catch {
      // The process went away while we looked.
    }
  }
  return out;
}

/** Live processes below `root` in the parent chain (children, grandchildren, ...). */
function descendantsOf(root: number): ProcInfo[] {
  const all = listProcesses();
  const found: ProcInfo[] = [];
  const parents = new Set([root]);
  for (let grew = true; grew; ) {
    grew = false;
    for (const p of all) {
      if (parents.has(p.ppid) && !parents.has(p.pid)) {
        parents.add(p.pid);
        found.push(p);
        grew = true;
      }
    }
  }
  return found;
}

describe.skipIf(!isBuilt())("gateway lifecycle end to end (real process)", () => {
  let fake: FakeOpenAI;
  let dir: ReturnType<typeof createTempDir>;
  let spawned: GatewayProcess[];
  /** Extra pids to kill at the end (successors, tool process groups). */
  let strays: number[];

  async function start(env: Record<string, string> = {}): Promise<GatewayProcess> {
    const gw = await startGatewayProcess({
      home: dir.path,
      env: {
        KEEL_LOG_LEVEL: "info",
        OPENAI_BASE_URL: fake.baseUrl,
        OPENAI_API_KEY: "test",
        KEEL_MODEL: "fake-model",
        KEEL_WEBCHAT_ENABLED: "false",
        ...env,
      },
    });
    spawned.push(gw);
    return gw;
  }

  async function startReady(env: Record<string, string> = {}): Promise<GatewayProcess> {
    const gw = await start(env);
    await gw.waitForReady();
    return gw;
  }

  function control(gw: GatewayProcess, path: string, init: RequestInit = {}) {
    return gw.control(path, { ...init, headers: { "content-type": "application/json" } });
  }

  /** A chat completion through the OpenAI-compatible API (no session id: a new session). */
  function chat(gw: GatewayProcess, text: string): Promise<Response> {
    return gw.control("/v1/chat/completions", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "fake-model", messages: [{ role: "user", content: text }] }),
    });
  }

  async function replyOf(res: Response): Promise<string> {
    const body = (await res.json()) as { choices?: { message: { content: string } }[] };
    return body.choices?.[0]?.message.content ?? JSON.stringify(body);
  }

  async function onlySessionId(gw: GatewayProcess): Promise<string> {
    return waitFor(async () => {
      const res = await control(gw, "/api/sessions");
      const { sessions } = (await res.json()) as { sessions: { session_id: string }[] };
      return sessions.length === 1 ? sessions[0]!.session_id : null;
    });
  }

  async function transcript(gw: GatewayProcess, sessionId: string) {
    const res = await control(gw, `/api/sessions/${sessionId}`);
    const body = (await res.json()) as { messages: { role: string; content: string | null }[] };
    return body.messages;
  }

  /** Waits until the model has been asked `n` times in all. */
  const modelAsked = (n: number) =>
    waitFor(() => fake.requests.length >= n, { timeoutMs: 10_000, message: `${n} model calls` });

  beforeEach(async () => {
    fake = await startFakeOpenAI();
    dir = createTempDir("keel-e2e-");
    spawned = [];
    strays = [];
  });

  afterEach(async () => {
    try {
      for (const gw of spawned) await gw.stop();
      for (const pid of strays) killQuietly(pid, "SIGKILL");
    } finally {
      // A refused kill (killQuietly's guard) fails the test, and the rest is still cleaned up.
      await killNamedGateway(dir.path);
      await fake.close();
      dir.cleanup();
    }
  });

  it("SIGTERM during a turn, start again: the session resumes by itself and its reply is stored", async () => {
    const first = await startReady();
    const pending = chat(first, "slow: 20000 never sent").catch(() => null);
    await modelAsked(1);
    const sessionId = await onlySessionId(first);
    fake.script({ text: "resumed after SIGTERM" });
    first.kill("SIGTERM");
    expect((await first.exited).code).toBe(1);
    await pending;

    const second = await startReady();
    await waitFor(async () =>
      (await transcript(second, sessionId)).some(
        (m) => m.role === "assistant" && m.content === "resumed after SIGTERM",
      ),
    );
    const resumeCall = fake.requests.at(-1)!;
    expect(resumeCall.messages.at(-1)?.role).toBe("system");
    expect(String(resumeCall.messages.at(-1)?.content)).toContain("gateway shutdown");
  });

  it("SIGKILL during a turn, start again: no 'already running', and the session resumes", async () => {
    const first = await startReady();
    const pending = chat(first, "slow: 20000 never sent").catch(() => null);
    await modelAsked(1);
    const sessionId = await onlySessionId(first);
    fake.script({ text: "resumed after SIGKILL" });
    first.kill("SIGKILL");
    await first.exited;
    await pending;
    expect(readPid(dir.path)?.pid).toBe(first.pid);
    expect(existsSync(join(dir.path, ".clean_shutdown"))).toBe(false);

    const second = await startReady();
    expect(second.output()).not.toMatch(/already running/i);
    await waitFor(async () =>
      (await transcript(second, sessionId)).some(
        (m) => m.role === "assistant" && m.content === "resumed after SIGKILL",
      ),
    );
    expect(String(fake.requests.at(-1)?.messages.at(-1)?.content)).toContain(
      "unexpected gateway stop",
    );
  });

  it("drain then cancel over HTTP: not ready while drained, new work refused, a running turn finishes untouched", async () => {
    const gw = await startReady();
    const running = chat(gw, "slow: 1500 finished untouched");
    await modelAsked(1);
    const drain = await control(gw, "/api/gateway/drain", {
      method: "POST",
      body: JSON.stringify({ action: "drain" }),
    });
    expect(await drain.json()).toEqual({ draining: true });
    expect((await fetch(`${gw.baseUrl}/readyz`)).status).toBe(503);
    await waitFor(() => readState(gw.home)?.gateway_state === "draining", {
      message: "gateway_state draining",
    });
    // An API client is told in HTTP terms (chat platforms get the drain text).
    const refused = await chat(gw, "echo: new work");
    expect(refused.status).toBe(503);
    expect(refused.headers.get("retry-after")).toBe("30");
    expect(((await refused.json()) as { error: { code: string } }).error.code).toBe(
      "gateway_draining",
    );
    expect(await replyOf(await running)).toBe("finished untouched");
    const cancel = await control(gw, "/api/gateway/drain", {
      method: "POST",
      body: JSON.stringify({ action: "cancel" }),
    });
    expect(await cancel.json()).toEqual({ draining: false });
    expect((await fetch(`${gw.baseUrl}/readyz`)).status).toBe(200);
    expect(await replyOf(await chat(gw, "echo: welcome back"))).toBe("welcome back");
    await waitFor(() => readState(gw.home)?.gateway_state === "running");
  });

  it("a planned stop (marker, then SIGTERM) exits 0, persists stopped and leaves .clean_shutdown", async () => {
    const gw = await startReady();
    const record = readPid(dir.path)!;
    await writePlannedStop(dir.path, {
      pid: record.pid,
      startTime: record.start_time,
      now: Date.now(),
    });
    gw.kill("SIGTERM");
    expect((await gw.exited).code).toBe(0);
    expect(readState(dir.path)?.gateway_state).toBe("stopped");
    expect(existsSync(join(dir.path, ".clean_shutdown"))).toBe(true);
    expect(existsSync(join(dir.path, ".planned_stop.json"))).toBe(false);
    expect(readPid(dir.path)).toBeNull();
  });

  it("the planned-stop marker alone (no signal) stops the gateway: exit 0, stopped", async () => {
    const gw = await startReady();
    const record = readPid(dir.path)!;
    await writePlannedStop(dir.path, {
      pid: record.pid,
      startTime: record.start_time,
      now: Date.now(),
    });
    await waitFor(() => gw.exitStatus !== null, {
      timeoutMs: 10_000,
      message: "the watcher's stop",
    });
    const { code } = await gw.exited;
    expect(code).toBe(0);
    expect(readState(dir.path)?.gateway_state).toBe("stopped");
  });

  it("a bare SIGTERM exits 1 and leaves gateway_state running", async () => {
    const gw = await startReady();
    gw.kill("SIGTERM");
    expect((await gw.exited).code).toBe(1);
    expect(readState(dir.path)?.gateway_state).toBe("running");
    expect(readState(dir.path)?.exit_reason).toBe("signal");
  });

  it("a second gateway on the same home exits 1 with a message naming the running pid", async () => {
    const first = await startReady();
    const second = await start();
    expect((await second.exited).code).toBe(1);
    expect(second.output()).toContain(`PID ${first.pid}`);
    expect((await fetch(`${first.baseUrl}/readyz`)).status).toBe(200);
  });

  it("the whole stop finishes within restart_drain_timeout + 10 s with a hung model and a hung tool, and the tool's process group is gone", async () => {
    const drainSeconds = 2;
    const gw = await startReady({ KEEL_RESTART_DRAIN_TIMEOUT: String(drainSeconds) });
    fake.hangNext();
    const hung = chat(gw, "this model call hangs").catch(() => null);
    await modelAsked(1);
    const tool = chat(gw, "run: sleep 60").catch(() => null);
    // The tool's process group: a descendant of this gateway that leads a group of its own.
    // Found by ancestry, never by command line, so no unrelated process is ever touched. A child
    // caught between fork and setsid still sits in the test's own group (the gateway is not
    // detached), and killing that group would kill the test runner and its CI job with it.
    const sleeper = await waitFor(
      () => descendantsOf(gw.pid).find((p) => p.pgid === p.pid) ?? null,
      { timeoutMs: 10_000, message: "the tool's process group" },
    );
    strays.push(-sleeper.pgid);
    const record = readPid(dir.path)!;
    await writePlannedStop(dir.path, {
      pid: gw.pid,
      startTime: record.start_time,
      now: Date.now(),
    });
    const started = Date.now();
    gw.kill("SIGTERM");
    const { code } = await gw.exited;
    const elapsed = Date.now() - started;
    expect(code).toBe(0);
    expect(elapsed).toBeLessThan((drainSeconds + 10) * 1000);
    // Zombies do not count: the container's init may be slow to reap the orphans.
    expect(listProcesses().filter((p) => p.pgid === sleeper.pgid)).toEqual([]);
    await Promise.all([hung, tool]);
  });

  it.skipIf(IN_CONTAINER)(
    "SIGUSR1 outside a service manager: the old process exits 0 and a new pid comes up by itself",
    async () => {
      const first = await startReady();
      first.kill("SIGUSR1");
      expect((await first.exited).code).toBe(0);
      const successor = await waitFor(
        () => {
          const record = readPid(dir.path);
          return record && record.pid !== first.pid ? record : null;
        },
        { timeoutMs: 20_000, message: "the successor's pid file" },
      );
      strays.push(successor.pid);
      await waitFor(async () => (await fetch(`${first.baseUrl}/readyz`)).status === 200, {
        timeoutMs: 20_000,
        message: "the successor ready",
      });
      expect(isAlive(successor.pid)).toBe(true);
    },
  );

  it.skipIf(!IN_CONTAINER)(
    "SIGUSR1 in a container: exits 75 for the container runtime to restart, and persists stopped",
    async () => {
      const first = await startReady();
      first.kill("SIGUSR1");
      expect((await first.exited).code).toBe(75);
      expect(readState(dir.path)?.gateway_state).toBe("stopped");
      expect(readState(dir.path)?.restart_requested).toBe(true);
      expect(existsSync(join(dir.path, ".restart_pending.json"))).toBe(true);
    },
  );

  it("POST /api/gateway/restart is idempotent: the second request says a restart is already under way", async () => {
    const gw = await startReady({ KEEL_RESTART_DRAIN_TIMEOUT: "10" });
    const running = chat(gw, "slow: 1500 done before the restart");
    await modelAsked(1);
    const first = await control(gw, "/api/gateway/restart", { method: "POST" });
    expect(await first.json()).toMatchObject({ accepted: true });
    const second = await control(gw, "/api/gateway/restart", { method: "POST" });
    expect(await second.json()).toEqual({
      accepted: false,
      message: "A stop or restart is already under way.",
    });
    expect(await replyOf(await running)).toBe("done before the restart");
    expect((await gw.exited).code).toBe(IN_CONTAINER ? 75 : 0);
  });

  it(".clean_shutdown is present after a clean stop and absent after SIGKILL", async () => {
    const first = await startReady();
    first.kill("SIGINT");
    expect((await first.exited).code).toBe(0);
    expect(existsSync(join(dir.path, ".clean_shutdown"))).toBe(true);
    const second = await startReady();
    expect(existsSync(join(dir.path, ".clean_shutdown"))).toBe(false);
    second.kill("SIGKILL");
    await second.exited;
    expect(existsSync(join(dir.path, ".clean_shutdown"))).toBe(false);
  });
});
