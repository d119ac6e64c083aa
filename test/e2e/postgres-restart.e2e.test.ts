/**
 * One gateway on Postgres, SIGKILLed in the middle of a turn and started again at once in the
 * same home, as a service manager would (issue 43): the new process has a new instance id, so
 * the dead one's leases are not its own. It proves its predecessor is gone (same host and home,
 * the process no longer exists) and takes those leases over at start, so the cut-off turn is
 * recovered and resumed by the start-up path, not by the takeover sweep once the lease TTL
 * (15 s) has run out. Asserted on the log and the record, not on the clock.
 */
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { answeredIds } from "../chaos/chaos-model.js";
import { createRig, type Rig } from "../chaos/rig.js";
import { type GatewayProcess, isBuilt } from "../helpers/gateway-process.js";
import { waitFor } from "../helpers/wait-for.js";

const CHAT = 4301;
let rig: Rig | null = null;
let gateway: GatewayProcess | null = null;

beforeAll(() => {
  if (!isBuilt()) throw new Error("run `npm run build` first: these tests start bin/keel.js");
});

afterEach(async () => {
  await gateway?.stop();
  gateway = null;
  await rig?.close();
  rig = null;
});

interface LogLine {
  pid?: number;
  msg?: string;
  [field: string]: unknown;
}

/** The JSON log lines one process wrote to the home's gateway.log. */
function logOf(r: Rig, pid: number): LogLine[] {
  return readFileSync(join(r.home, "logs", "gateway.log"), "utf8")
    .split("\n")
    .flatMap((line) => {
      try {
        return [JSON.parse(line) as LogLine];
      } catch {
        return [];
      }
    })
    .filter((entry) => entry.pid === pid);
}

describe.skipIf(process.env.KEEL_TEST_PG === "skip")(
  "a gateway on Postgres restarted after SIGKILL",
  () => {
    it("takes its dead predecessor's leases over and resumes the cut-off turn at start", async () => {
      const r = await createRig({ chats: [CHAT], seed: 7, store: "postgres" });
      rig = r;
      // Killed (SIGKILL) right after the turn started, under the session's lease (TTL 15 s).
      const first = await r.start({ crashPoint: "after_turn_start" });
      gateway = first;
      r.telegram.sendUserMessage({ chatId: CHAT, text: "c1.1 tool" });
      expect(await first.exitsWithin(30_000), "killed at after_turn_start").toBe(true);
      expect(first.exitStatus?.signal).toBe("SIGKILL");
      const [lease] = await r.query(
        `SELECT owner, expires_at > (extract(epoch FROM clock_timestamp()) * 1000)::bigint AS live
         FROM session_leases WHERE session_key = '${r.sessionKey(CHAT)}'`,
      );
      expect(lease?.live, "the dead gateway's lease is still live").toBe(true);

      const second = await r.start();
      gateway = second;
      const reply = await waitFor(
        () =>
          r.telegram
            .chatLog(CHAT)
            .find((e) => e.from === "bot" && answeredIds(e.text).includes("c1.1")),
        { timeoutMs: 60_000, message: "the resumed reply" },
      );
      expect(reply.text).toMatch(/^re c1\.1 r\d+$/);

      const log = logOf(r, second.pid);
      const messages = log.map((l) => l.msg);
      expect(
        log.find((l) => l.msg?.startsWith("took over the leases of this home's previous")),
      ).toMatchObject({
        predecessor: lease?.owner,
        predecessorPid: first.pid,
        proof: "process_gone",
      });
      // Recovered and resumed by the start itself, not by the sweep after the lease ran out.
      expect(log.find((l) => l.msg === "recovered interrupted work")).toMatchObject({
        interruptedTurns: 1,
      });
      expect(messages).toContain("resuming interrupted sessions");
      expect(messages).not.toContain(
        "took over the turns of a gateway that stopped renewing its leases",
      );
      // The dead gateway is gone from the registry; the session's lease moved to the new one.
      const instances = await r.query("SELECT id, pid FROM instances");
      expect(instances.map((i) => Number(i.pid))).toEqual([second.pid]);
      const turns = await r.query("SELECT inbox_id, state FROM turns ORDER BY id");
      expect(turns).toEqual([
        { inbox_id: expect.anything(), state: "interrupted" },
        { inbox_id: null, state: "done" },
      ]);
    }, 120_000);

    it("waits out the lease TTL when its predecessor cannot be proven gone", async () => {
      const r = await createRig({ chats: [CHAT], seed: 7, store: "postgres" });
      rig = r;
      const first = await r.start({ crashPoint: "after_turn_start" });
      gateway = first;
      r.telegram.sendUserMessage({ chatId: CHAT, text: "c1.1 plain" });
      expect(await first.exitsWithin(30_000), "killed at after_turn_start").toBe(true);
      // The home's record says the previous gateway ran on another host: nothing proves it gone.
      const recordPath = join(r.home, "cluster_instance.json");
      const record = JSON.parse(readFileSync(recordPath, "utf8")) as Record<string, unknown>;
      writeFileSync(recordPath, JSON.stringify({ ...record, host: "another-host" }));

      const second = await r.start();
      gateway = second;
      await waitFor(
        () =>
          r.telegram
            .chatLog(CHAT)
            .find((e) => e.from === "bot" && answeredIds(e.text).includes("c1.1")),
        { timeoutMs: 90_000, message: "the reply, once the lease has run out" },
      );
      const messages = logOf(r, second.pid).map((l) => l.msg);
      expect(messages).toContain(
        "this home's previous gateway cannot be proven gone; its leases run out by themselves",
      );
      expect(messages).not.toContain(
        "took over the leases of this home's previous gateway, which is gone",
      );
      // The turn was taken over by the sweep, once the dead gateway's lease had run out.
      expect(messages).toContain(
        "took over the turns of a gateway that stopped renewing its leases",
      );
    }, 150_000);
  },
);
