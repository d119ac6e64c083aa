/**
 * Two gateways' runners on one Postgres store: a chat command that changes a session acts only
 * under the session's lease, as a turn does, so it never acts while another gateway's turn works
 * on that session.
 */
import pino from "pino";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { startTcpProxy } from "../../test/fakes/tcp-proxy.js";
import { adminQuery, createTestSchema, postgresHarness } from "../../test/helpers/store-harness.js";
import { waitFor } from "../../test/helpers/wait-for.js";
import type { TurnResult } from "../agent/types.js";
import type { InboundMessage } from "../contract/platform.js";
import { recoverInterruptedWork } from "../recovery/recovery.js";
import { resumeHeldBack } from "../recovery/startup-resume.js";
import { PgStore } from "../sessions/pg-store.js";
import type { Store } from "../sessions/store.js";
import type { AgentRun } from "./agent-run.js";
import { Runner } from "./runner.js";
import { TEXT } from "./texts.js";

const KEY = "agent:main:test:c";
const address = { platform: "test", chatId: "c" };

function message(id: string, text: string): InboundMessage {
  return { platform: "test", chatId: "c", platformMessageId: id, sessionKey: KEY, text, address };
}

/** An agent whose turns answer only once the test opens the gate. */
function gatedAgent() {
  let open!: () => void;
  const gate = new Promise<void>((resolve) => {
    open = resolve;
  });
  let entered = 0;
  const agent: AgentRun = async (input): Promise<TurnResult> => {
    entered += 1;
    await gate;
    input.signal.throwIfAborted();
    return {
      stopReason: "stop",
      reply: "first answer",
      finalMessage: { role: "assistant", content: "first answer" },
      iterations: 1,
    };
  };
  return { agent, open: () => open(), entered: () => entered };
}

describe.skipIf(process.env.KEEL_TEST_PG === "skip")(
  "chat commands with two gateways on one store",
  () => {
    const harness = postgresHarness();
    let stores: Store[];
    let runners: Runner[];

    beforeEach(async () => {
      await harness.setup();
      stores = [];
      runners = [];
    });
    afterEach(async () => {
      for (const r of runners) r.interruptAll();
      await Promise.all(runners.map((r) => r.waitForIdle(5000)));
      await Promise.all(stores.map((s) => s.close()));
      await harness.teardown();
    });

    async function gateway(
      owner: string,
      agent: AgentRun,
    ): Promise<{ store: Store; runner: Runner }> {
      const store = await harness.open(undefined, { instanceId: owner });
      stores.push(store);
      return { store, runner: runnerOn(store, agent, owner) };
    }

    /**
     * A gateway's runner on `store`, its turns run by `agent`; queue mode, and a long lease TTL:
     * a cut-off turn's lease must be given up once the store answers, not run out.
     */
    function runnerOn(store: Store, agent: AgentRun, owner: string): Runner {
      const runner = new Runner({
        store,
        agent,
        isReadOnlyTool: () => false,
        busyInputMode: "queue",
        maxConcurrentTurns: 4,
        autoResumeFreshnessMs: 3_600_000,
        logger: pino({ level: "silent" }),
        control: { requestRestart: async () => null, setHomeChannel: async () => {} },
        onReplyQueued: () => {},
        crashPoint: () => {},
        sessionLeases: { owner, ttlMs: 60_000 },
      });
      runners.push(runner);
      return runner;
    }

    const inboxState = async (platformMessageId: string) =>
      (
        await harness.rows(
          `SELECT state FROM inbox WHERE platform_message_id = '${platformMessageId}'`,
        )
      )[0]?.state;

    it("/new sent to a gateway while another one runs the session's turn acts once that turn has ended", async () => {
      const gated = gatedAgent();
      const a = await gateway("gw-a", gated.agent);
      const b = await gateway("gw-b", gatedAgent().agent);
      await a.runner.receive(message("m1", "hello"));
      await waitFor(() => gated.entered() === 1, { message: "A's turn runs" });
      const before = (await a.store.getSession(KEY))!.sessionId;

      await b.runner.receive(message("m2", "/new"));
      // Given its chance to act (it would reset at once): it waits for the session instead.
      await waitFor(async () => (await inboxState("m2")) === "done", {
        timeoutMs: 2000,
      }).catch(() => {});
      expect(await inboxState("m2")).toBe("pending");
      expect((await b.store.getSession(KEY))!.sessionId).toBe(before);

      gated.open();
      await waitFor(async () => (await inboxState("m2")) === "done", {
        timeoutMs: 15_000,
        message: "/new acted once A's turn ended",
      });
      // A's answer went to the conversation it ran in; the new session started after it.
      const rows = await harness.rows("SELECT text, session_id FROM outbox ORDER BY id");
      expect(rows).toEqual([
        { text: "first answer", session_id: before },
        { text: TEXT.newSession, session_id: expect.any(String) },
      ]);
      expect((await b.store.getSession(KEY))!.sessionId).not.toBe(before);
      expect(await harness.rows("SELECT state FROM turns")).toEqual([{ state: "done" }]);
    });

    it("/stop sent to a gateway that does not run the session's turn says where it runs", async () => {
      const gated = gatedAgent();
      const a = await gateway("gw-a", gated.agent);
      const b = await gateway("gw-b", gatedAgent().agent);
      await a.runner.receive(message("m1", "hello"));
      await waitFor(() => gated.entered() === 1, { message: "A's turn runs" });
      await b.runner.receive(message("m2", "/stop"));
      await waitFor(async () => (await inboxState("m2")) === "done", {
        timeoutMs: 15_000,
        message: "/stop answered",
      });
      expect(await harness.rows("SELECT text FROM outbox ORDER BY id")).toEqual([
        { text: TEXT.stopElsewhere },
      ]);
      gated.open();
      await waitFor(async () => (await inboxState("m1")) === "done", {
        timeoutMs: 15_000,
        message: "A's turn answered",
      });
    });

    /** Each turn's state and the message it answered (null: a resume), in order. */
    const turnsIn = (schema: string) =>
      adminQuery(
        `SELECT t.state, i.platform_message_id AS message FROM ${schema}.turns t
           LEFT JOIN ${schema}.inbox i ON i.id = t.inbox_id ORDER BY t.id`,
      );

    /**
     * A gateway whose runner reaches the database through a relay the test cuts and restores, on
     * a schema of its own; its agent answers once the test opens the gate.
     */
    async function relayedGateway() {
      const relay = await startTcpProxy({ host: "127.0.0.1", port: 5432 });
      const own = await createTestSchema();
      const store = await PgStore.open(`postgres://postgres@127.0.0.1:${relay.port}/test`, {
        schema: own.schema,
        instanceId: "gw-a",
      });
      const gated = gatedAgent();
      const runner = runnerOn(store, gated.agent, "gw-a");
      return { relay, own, store, runner, gated };
    }

    it("a message whose turn could not start while the database was away runs once it is back", async () => {
      const { relay, own, store, runner, gated } = await relayedGateway();
      try {
        let storeBack = 0;
        runner.onStoreBack(() => {
          storeBack += 1;
        });
        await runner.receive(message("m1", "hello"));
        await waitFor(() => gated.entered() === 1, { message: "the first turn runs" });
        await runner.receive(message("m2", "queued behind"));
        await relay.cut();
        // The first turn cannot record its end; the queued one cannot start: both fail.
        gated.open();
        await runner.waitForIdle(15_000);
        await relay.restore();
        // The takeover (src/gateway/cluster.ts, told by onStoreBack) recovers the cut-off first
        // turn once its lease is free, and resumes it here; the queued message waits for that.
        const logger = pino({ level: "silent" });
        await waitFor(
          async () => {
            const report = await recoverInterruptedWork(store, {
              cleanShutdown: true,
              now: Date.now(),
              leases: { owner: "gw-a:takeover", ttlMs: 60_000 },
            });
            if (report.markedSessions.length === 0) return false;
            await resumeHeldBack({ store, runner, keys: report.markedSessions, logger });
            return true;
          },
          { timeoutMs: 20_000, intervalMs: 200, message: "the cut-off turn taken over" },
        );
        expect(storeBack).toBeGreaterThan(0);
        const state = async () =>
          (
            await adminQuery(
              `SELECT state FROM ${own.schema}.inbox WHERE platform_message_id = 'm2'`,
            )
          )[0]?.state;
        await waitFor(async () => (await state()) === "done", {
          timeoutMs: 20_000,
          message: "the queued message answered once the database is back",
        });
        // The first turn cut off, its resume, then the queued message: in that order, each once.
        expect(await turnsIn(own.schema)).toEqual([
          { state: "interrupted", message: "m1" },
          { state: "done", message: null },
          { state: "done", message: "m2" },
        ]);
      } finally {
        runners.pop()?.interruptAll();
        await store.close();
        await relay.close();
        await own.drop();
      }
    });

    it("a resume that could not start while the database was away runs once it is back", async () => {
      const { relay, own, store, runner, gated } = await relayedGateway();
      try {
        await runner.receive(message("m1", "hello"));
        await waitFor(() => gated.entered() === 1, { message: "the first turn runs" });
        await relay.cut();
        gated.open();
        await runner.waitForIdle(15_000);
        await relay.restore();
        // The takeover marks the cut-off turn and reads the session to resume...
        const marked = await waitFor(
          async () => {
            const report = await recoverInterruptedWork(store, {
              cleanShutdown: true,
              now: Date.now(),
              leases: { owner: "gw-a:takeover", ttlMs: 60_000 },
            });
            return report.markedSessions.length > 0 ? report.markedSessions : null;
          },
          { timeoutMs: 20_000, intervalMs: 200, message: "the cut-off turn taken over" },
        );
        const session = (await store.getSession(marked[0]!))!;
        expect(session.resumePending).toBe(true);
        // ...and the database goes away again before the resume could claim the session.
        await relay.cut();
        runner.resume(session);
        await runner.waitForIdle(15_000);
        await relay.restore();
        await waitFor(
          async () =>
            (
              await adminQuery(
                `SELECT id FROM ${own.schema}.turns WHERE inbox_id IS NULL AND state = 'done'`,
              )
            ).length === 1,
          { timeoutMs: 20_000, message: "the resume ran once the database was back" },
        );
        expect(await turnsIn(own.schema)).toEqual([
          { state: "interrupted", message: "m1" },
          { state: "done", message: null },
        ]);
        expect((await store.getSession(KEY))!.resumePending).toBe(false);
      } finally {
        runners.pop()?.interruptAll();
        await store.close();
        await relay.close();
        await own.drop();
      }
    });
  },
);
