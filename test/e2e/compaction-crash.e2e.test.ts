/**
 * SIGKILL at each compaction crash point, with the built `keel gateway run` as a real process and
 * the stand-in model with a 4k window: at the kill the store holds either the old history (no
 * compaction row) or the compacted one (a whole compaction row), never half; after a restart the
 * session answers, still knows its first fact, and no tool call ran twice. Needs `npm run build`.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { openSqliteDatabase } from "../../src/sessions/sqlite-database.js";
import { type FakeOpenAI, startFakeOpenAI } from "../fakes/openai-server.js";
import { type GatewayProcess, isBuilt, startGatewayProcess } from "../helpers/gateway-process.js";
import { waitFor } from "../helpers/wait-for.js";

const KEY = "e2e-compaction-api-key";

let fake: FakeOpenAI;
let home: string;
let gateways: GatewayProcess[] = [];

beforeAll(() => {
  if (!isBuilt()) throw new Error("run `npm run build` first: these tests start bin/keel.js");
});

beforeEach(async () => {
  fake = await startFakeOpenAI({ contextLength: 4096 });
  home = mkdtempSync(join(tmpdir(), "keel-e2e-compact-"));
});

afterEach(async () => {
  await Promise.all(gateways.map((g) => g.stop()));
  gateways = [];
  await fake.close();
  rmSync(home, { recursive: true, force: true });
});

async function startGateway(crashPoint?: string): Promise<GatewayProcess> {
  const gateway = await startGatewayProcess({
    home,
    env: { OPENAI_BASE_URL: fake.baseUrl, KEEL_MODEL: "fake-model", KEEL_API_KEY: KEY },
    ...(crashPoint && { crashPoint }),
  });
  gateways.push(gateway);
  await gateway.waitForReady();
  return gateway;
}

/** One user message; the reply text, or null when the connection broke (the process died). */
async function say(gateway: GatewayProcess, text: string, sessionId?: string) {
  try {
    const res = await gateway.fetch("/v1/chat/completions", {
      method: "POST",
      headers: {
        "content-type": "application/json",
        authorization: `Bearer ${KEY}`,
        ...(sessionId && { "X-Session-Id": sessionId }),
      },
      body: JSON.stringify({ model: "fake-model", messages: [{ role: "user", content: text }] }),
    });
    const body = (await res.json()) as { choices?: Array<{ message: { content: string } }> };
    return {
      text: body.choices?.[0]?.message.content ?? null,
      session: res.headers.get("x-session-id"),
    };
  } catch {
    return { text: null, session: null };
  }
}

function query<T>(sql: string): T[] {
  const db = openSqliteDatabase(join(home, "state.db"), { readonly: true, fileMustExist: true });
  try {
    return db.prepare(sql).all() as T[];
  } finally {
    db.close();
  }
}

describe("a crash during a compaction", () => {
  for (const point of ["mid_compaction", "after_compaction"] as const) {
    it(`leaves a usable session with its facts (SIGKILL at ${point})`, async () => {
      const first = await startGateway(point);
      const opened = await say(first, "remember: anchor=granite");
      expect(opened.text).toBe("ok: remember: anchor=granite");
      const sessionId = opened.session!;
      // Large tool outputs until the budget forces a compaction, which the crash point ends.
      for (let i = 0; i < 12 && first.exitStatus === null; i++) {
        await say(first, "big: 2500", sessionId);
      }
      expect(await first.exitsWithin(15_000)).toBe(true);
      expect(first.exitStatus?.signal).toBe("SIGKILL");

      const rows = query<{ through_seq: number; summary: string }>("SELECT * FROM compactions");
      const usage = query<{ n: number }>(
        "SELECT COUNT(*) AS n FROM model_usage WHERE purpose = 'compaction'",
      );
      if (point === "mid_compaction") {
        // Killed before the commit: the old history stands, nothing of the summary was kept.
        expect(rows).toEqual([]);
        expect(usage).toEqual([{ n: 0 }]);
      } else {
        expect(rows).toHaveLength(1);
        expect(rows[0]!.summary).toContain("remember: anchor=granite");
        expect(usage).toEqual([{ n: 1 }]);
      }

      const second = await startGateway();
      // The interrupted turn resumes by itself; then the session answers new messages.
      await waitFor(
        () =>
          query<{ state: string }>("SELECT state FROM turns WHERE state = 'running'").length === 0,
        { timeoutMs: 20_000, message: "the resumed turn to finish" },
      );
      expect((await say(second, "recall: anchor", sessionId)).text).toBe("recalled: granite");
      expect(query("SELECT * FROM compactions").length).toBeGreaterThanOrEqual(1);

      // Every terminal call ran once: one journal row per call, all finished with real output.
      const calls = query<{ tool_call_id: string; state: string; result: string }>(
        "SELECT tool_call_id, state, result FROM tool_calls",
      );
      expect(new Set(calls.map((c) => c.tool_call_id)).size).toBe(calls.length);
      expect(calls.every((c) => c.state === "finished" && /^x+/.test(c.result))).toBe(true);
      await second.terminate();
    }, 120_000);
  }
});
