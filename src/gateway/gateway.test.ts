import { existsSync, fsync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { type FakeOpenAI, startFakeOpenAI } from "../../test/fakes/openai-server.js";
import {
  type InProcessGateway,
  startInProcessGateway,
  testSessionKey,
} from "../../test/helpers/in-process-gateway.js";
import { createTempDir } from "../../test/helpers/temp-home.js";
import { waitFor } from "../../test/helpers/wait-for.js";
import {
  CLEAN_SHUTDOWN_FILE,
  RESTART_NOTIFY_FILE,
  writePlannedStop,
} from "../lifecycle/markers.js";
import { readPidFile } from "../lifecycle/pid-file.js";
import { readRuntimeStatus } from "../lifecycle/runtime-status.js";
import {
  DRAIN_REFUSAL,
  RESTART_NOTICE,
  RESTART_NOTICE_AUTO_RESUME,
  RESTARTED_NOTICE,
  STOP_NOTICE,
} from "../runner/lifecycle-texts.js";
import { SqliteStore } from "../sessions/sqlite-store.js";
import type { FsyncFn } from "../sessions/wal-sync.js";
import { AlreadyRunningError } from "./gateway.js";

/** The SQLite store's fsync: the real one until `break()`, then an I/O error on every call. */
function breakableDisk() {
  let broken = false;
  const fsyncOrFail: FsyncFn = (fd, done) =>
    broken
      ? done(Object.assign(new Error("EIO: i/o error, fsync"), { code: "EIO" }))
      : fsync(fd, done);
  return {
    fsync: fsyncOrFail,
    break: () => {
      broken = true;
    },
  };
}

describe("Gateway lifecycle (in process)", () => {
  let dir: ReturnType<typeof createTempDir>;
  let fake: FakeOpenAI;
  let running: InProcessGateway[];

  async function boot(
    options: Partial<Parameters<typeof startInProcessGateway>[0]> = {},
  ): Promise<InProcessGateway> {
    const gw = await startInProcessGateway({
      home: dir.path,
      modelBaseUrl: fake.baseUrl,
      ...options,
    });
    running.push(gw);
    return gw;
  }

  /** Opens the state database of a stopped gateway. */
  async function withStore<T>(fn: (store: SqliteStore) => Promise<T>): Promise<T> {
    const store = new SqliteStore(join(dir.path, "state.db"));
    try {
      return await fn(store);
    } finally {
      await store.close();
    }
  }

  function api(gw: InProcessGateway, path: string, init: RequestInit = {}): Promise<Response> {
    return fetch(`${gw.url}${path}`, {
      ...init,
      headers: {
        authorization: `Bearer ${gw.controlToken}`,
        "content-type": "application/json",
        ...init.headers,
      },
    });
  }

  const agentStarted = (gw: InProcessGateway, n = 1) =>
    gw.gateway.runner.activeTurns().filter((t) => t.agentStarted).length >= n;

  beforeEach(async () => {
    dir = createTempDir();
    fake = await startFakeOpenAI();
    running = [];
  });

  afterEach(async () => {
    for (const gw of running) await gw.shutdown();
    await fake.close();
    dir.cleanup();
  });

  it("stop with drain 0 interrupts running turns and disconnects every platform once", async () => {
    const gw = await boot();
    const a = await gw.send("slow: 20000 too late", "a");
    await gw.send("slow: 20000 too late", "b");
    await waitFor(() => agentStarted(gw, 2));
    expect(gw.gateway.requestStop({ restart: false, signalInitiated: false }).accepted).toBe(true);
    expect(await gw.gateway.exited).toBe(0);
    expect(gw.platform.stops).toBe(1);
    expect(gw.platform.texts("a")).toEqual([STOP_NOTICE]);
    expect(gw.platform.texts("b")).toEqual([STOP_NOTICE]);
    expect(gw.gateway.runner.activeTurns()).toEqual([]);
    expect((await readRuntimeStatus(dir.path))?.gateway_state).toBe("stopped");
    expect(existsSync(join(dir.path, CLEAN_SHUTDOWN_FILE))).toBe(false);
    await withStore(async (store) => {
      expect(await store.listRunningTurns()).toEqual([]);
      const session = await store.getSession(testSessionKey("a"));
      expect(session?.resumePending).toBe(true);
      expect(session?.resumeReason).toBe("shutdown_timeout");
      const transcript = await store.loadTranscript(a.sessionId);
      expect(transcript.map((m) => m.message.role)).toEqual(["user"]);
    });
  });

  it("a store that can no longer flush to disk makes it unready and ends it unplanned (exit 1); the next start recovers", async () => {
    const disk = breakableDisk();
    const gw = await boot({ sqliteFsync: disk.fsync });
    const answered = await gw.send("echo: before");
    await waitFor(() => gw.platform.texts().includes("before"));
    expect(gw.gateway.isReady()).toBe(true);
    disk.break();
    await expect(gw.send("echo: never acknowledged")).rejects.toThrow(/could not be flushed/);
    expect(gw.gateway.isReady()).toBe(false);
    expect(await gw.gateway.exited).toBe(1);
    expect((await readRuntimeStatus(dir.path))?.exit_reason).toBe("store_failed");
    expect((await readRuntimeStatus(dir.path))?.gateway_state).toBe("running");
    // Its record may lack the last commits: the next start does not take it for a clean stop.
    expect(existsSync(join(dir.path, CLEAN_SHUTDOWN_FILE))).toBe(false);
    expect(gw.platform.texts()).toEqual(["before"]);
    // A new process reopens the store and takes messages again. The refused message's commit
    // had reached the OS (only its flush failed here), so the new process finds it open and
    // answers it, once; a platform redelivering it (it was never acknowledged) is deduplicated.
    const next = await boot();
    expect(next.gateway.isReady()).toBe(true);
    await next.send("echo: after", "2");
    await waitFor(() => next.platform.texts("2").includes("after"));
    await waitFor(() => next.platform.texts("1").includes("never acknowledged"));
    await next.shutdown();
    expect(next.platform.texts("1")).toEqual(["never acknowledged"]);
    await withStore(async (store) => {
      const transcript = await store.loadTranscript(answered.sessionId);
      expect(transcript.map((m) => m.message.content)).toEqual([
        "echo: before",
        "before",
        "echo: never acknowledged",
        "never acknowledged",
      ]);
    });
  });

  it("a failed store stops the gateway without waiting out the drain for running turns", async () => {
    const disk = breakableDisk();
    const gw = await boot({ env: { KEEL_RESTART_DRAIN_TIMEOUT: "120" }, sqliteFsync: disk.fsync });
    await gw.send("slow: 60000 never answered", "a");
    await waitFor(() => agentStarted(gw));
    disk.break();
    await expect(gw.send("echo: refused", "b")).rejects.toThrow(/could not be flushed/);
    // With the drain (120 s) the stop would wait for the 60 s model call; the test's 30 s
    // timeout fails it then.
    expect(await gw.gateway.exited).toBe(1);
    expect(gw.gateway.runner.activeTurns()).toEqual([]);
  });

  it("a clean stop leaves .clean_shutdown and the next start removes it", async () => {
    const gw = await boot();
    await gw.send("echo: hi");
    await waitFor(() => gw.platform.texts().includes("hi"));
    expect(await gw.shutdown()).toBe(0);
    expect(existsSync(join(dir.path, CLEAN_SHUTDOWN_FILE))).toBe(true);
    await boot();
    expect(existsSync(join(dir.path, CLEAN_SHUTDOWN_FILE))).toBe(false);
  });

  it("a planned-stop marker naming this pid and the start time in gateway.pid stops it (as keel gateway stop writes it)", async () => {
    const gw = await boot();
    const record = await readPidFile(dir.path);
    expect(record?.pid).toBe(process.pid);
    await writePlannedStop(dir.path, {
      pid: record!.pid,
      startTime: record!.start_time,
      now: Date.now(),
    });
    let code: number | null = null;
    void gw.gateway.exited.then((c) => (code = c));
    await waitFor(() => code !== null, { message: "the planned-stop watcher's stop" });
    expect(code).toBe(0);
    expect((await readRuntimeStatus(dir.path))?.gateway_state).toBe("stopped");
  });

  it("refuses a second gateway on the same home, naming the running pid", async () => {
    await boot();
    const second = boot();
    await expect(second).rejects.toBeInstanceOf(AlreadyRunningError);
    await expect(second).rejects.toThrow(`PID ${process.pid}`);
  });

  it("a second restart request (chat, API, SIGUSR1) changes nothing", async () => {
    const gw = await boot({ supervisor: "container", env: { KEEL_RESTART_DRAIN_TIMEOUT: "30" } });
    let stops = 0;
    gw.gateway.onStopRequested(() => (stops += 1));
    await gw.send("slow: 1500 finished in time", "busy");
    await waitFor(() => agentStarted(gw));
    const first = await api(gw, "/api/gateway/restart", { method: "POST" });
    expect(first.status).toBe(202);
    expect(await first.json()).toMatchObject({ accepted: true });
    const second = await api(gw, "/api/gateway/restart", { method: "POST" });
    expect(await second.json()).toEqual({
      accepted: false,
      message: "A stop or restart is already under way.",
    });
    // What SIGUSR1 and `keel gateway restart` ask for.
    expect(gw.gateway.requestStop({ restart: true, signalInitiated: false }).accepted).toBe(false);
    await gw.send("/restart", "other");
    await waitFor(() => gw.platform.texts("other").length > 0);
    expect(gw.platform.texts("other")).toEqual(["⏳ Draining 1 active agent(s) before restart..."]);
    expect(await gw.gateway.exited).toBe(75);
    expect(stops).toBe(1);
    // One notice (sent before the drain wait), and the turn finished within the drain.
    expect(gw.platform.texts("busy")).toEqual([RESTART_NOTICE_AUTO_RESUME, "finished in time"]);
  });

  it("/restart while busy replies with the drain count and does not interrupt the running turn", async () => {
    const gw = await boot({ supervisor: "container", env: { KEEL_RESTART_DRAIN_TIMEOUT: "30" } });
    await gw.send("slow: 1500 work finished", "1");
    await waitFor(() => agentStarted(gw));
    await gw.send("/restart", "1");
    await waitFor(() => gw.platform.texts("1").includes("work finished"));
    // The restart notice goes out before the drain wait; the turn is not interrupted.
    expect(gw.platform.texts("1")).toEqual([
      "⏳ Draining 1 active agent(s) before restart...",
      RESTART_NOTICE_AUTO_RESUME,
      "work finished",
    ]);
    expect(await gw.gateway.exited).toBe(75);
    expect(existsSync(join(dir.path, RESTART_NOTIFY_FILE))).toBe(true);
    expect(existsSync(join(dir.path, CLEAN_SHUTDOWN_FILE))).toBe(true);
  });

  it("with auto_resume_freshness 0 the restart notice does not promise a resume by itself", async () => {
    const gw = await boot({
      supervisor: "container",
      env: { KEEL_RESTART_DRAIN_TIMEOUT: "30", KEEL_AUTO_RESUME_FRESHNESS: "0" },
    });
    await gw.send("slow: 1500 work finished", "1");
    await waitFor(() => agentStarted(gw));
    await gw.send("/restart", "1");
    await waitFor(() => gw.platform.texts("1").includes("work finished"));
    expect(gw.platform.texts("1")).toContain(RESTART_NOTICE);
    expect(gw.platform.texts("1")).not.toContain(RESTART_NOTICE_AUTO_RESUME);
    expect(await gw.gateway.exited).toBe(75);
  });

  it("after a chat /restart the new process greets that chat once", async () => {
    const first = await boot({ supervisor: "container" });
    await first.send("/restart", "asker");
    expect(await first.gateway.exited).toBe(75);
    // An idle gateway restarted from chat sends no interruption notice.
    expect(first.platform.texts()).toEqual([]);
    const second = await boot({ supervisor: "container" });
    await waitFor(() => second.platform.texts("asker").length > 0);
    expect(second.platform.delivered.map((d) => [d.address.chatId, d.text])).toEqual([
      ["asker", RESTARTED_NOTICE],
    ]);
    expect(second.platform.delivered[0]?.address.replyToMessageId).toBeDefined();
    expect(await second.shutdown()).toBe(0);
    const third = await boot();
    await gwSettled(third);
    expect(third.platform.texts()).toEqual([]);
  });

  it("after an unclean stop, sessions active in the last 120 s with work left become resume-pending", async () => {
    const now = Date.now();
    for (const [chatId, at] of [
      ["recent", now - 10_000],
      ["old", now - 200_000],
    ] as const) {
      const clocked = new SqliteStore(join(dir.path, "state.db"), { now: () => at });
      const { item } = await clocked.acceptInbound({
        platform: "test",
        chatId,
        platformMessageId: "x",
        sessionKey: testSessionKey(chatId),
        text: "hello",
        address: { platform: "test", chatId },
      });
      await clocked.closeInboxItem(item.id, "done");
      // An unanswered message: the record shows work left to continue.
      await clocked.appendMessages(item.sessionId, null, [{ role: "user", content: "hello" }]);
      await clocked.close();
    }
    // No .clean_shutdown: the previous process died. Freshness 0 keeps the marks visible
    // (stale sessions are left resume-pending instead of being resumed).
    const gw = await boot({ env: { KEEL_AUTO_RESUME_FRESHNESS: "0" } });
    const pending = (await gw.gateway.store.listResumePending()).map((s) => [
      s.key,
      s.resumeReason,
    ]);
    expect(pending).toEqual([[testSessionKey("recent"), "restart_interrupted"]]);
  });

  it("after a clean stop nothing is marked resume-pending", async () => {
    const gw = await boot();
    await gw.send("echo: hi");
    await waitFor(() => gw.platform.texts().includes("hi"));
    expect(await gw.shutdown()).toBe(0);
    const next = await boot({ env: { KEEL_AUTO_RESUME_FRESHNESS: "0" } });
    expect(await next.gateway.store.listResumePending()).toEqual([]);
  });

  it("an external drain sets gateway_state draining and /readyz 503, and a cancel undoes it", async () => {
    const gw = await boot();
    expect((await fetch(`${gw.url}/readyz`)).status).toBe(200);
    const drain = await api(gw, "/api/gateway/drain", {
      method: "POST",
      body: JSON.stringify({ action: "drain" }),
    });
    expect(await drain.json()).toEqual({ draining: true });
    expect((await fetch(`${gw.url}/readyz`)).status).toBe(503);
    await waitFor(async () => (await readRuntimeStatus(dir.path))?.gateway_state === "draining");
    const status = (await (await api(gw, "/api/status")).json()) as Record<string, unknown>;
    expect(status).toMatchObject({ gateway_state: "draining", draining: true });
    await gw.send("new work");
    await waitFor(() => gw.platform.texts().includes(DRAIN_REFUSAL));
    const cancel = await api(gw, "/api/gateway/drain", {
      method: "POST",
      body: JSON.stringify({ action: "cancel" }),
    });
    expect(await cancel.json()).toEqual({ draining: false });
    expect((await fetch(`${gw.url}/readyz`)).status).toBe(200);
    await waitFor(async () => (await readRuntimeStatus(dir.path))?.gateway_state === "running");
  });

  it("entering an external drain does not interrupt a running turn", async () => {
    const gw = await boot();
    await gw.send("slow: 800 finished untouched");
    await waitFor(() => agentStarted(gw));
    await gw.gateway.drain("drain");
    expect(gw.gateway.runner.activeTurns()).toHaveLength(1);
    await waitFor(() => gw.platform.texts().includes("finished untouched"));
    expect(gw.platform.texts()).toEqual(["finished untouched"]);
    expect(gw.gateway.isReady()).toBe(false);
  });

  it("a drain marker left from before the start is honoured at start", async () => {
    const gw = await boot();
    await gw.gateway.drain("drain");
    expect(await gw.shutdown()).toBe(0);
    const next = await boot();
    expect(next.gateway.isReady()).toBe(false);
    expect((await fetch(`${next.url}/readyz`)).status).toBe(503);
    await next.gateway.drain("cancel");
    expect(next.gateway.isReady()).toBe(true);
  });

  /** Waits until the outbox has nothing left to send (greetings are queued at start). */
  async function gwSettled(gw: InProcessGateway): Promise<void> {
    await waitFor(async () => (await gw.gateway.store.listPendingOutbox()).length === 0);
  }
});
