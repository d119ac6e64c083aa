/**
 * `Idempotency-Key` across a restart, with the built `keel gateway run` as a real process: a
 * request whose turn is cut off (SIGKILL, or an unannounced SIGTERM that answers it with 503
 * gateway_stopping) is resumed by the next process, and a retry with the same key gets the
 * resumed turn's reply — waiting for it while it runs — without any turn beyond the resume.
 * Needs `npm run build`.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type OpenAI from "openai";
import { afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { openSqliteDatabase } from "../../src/sessions/sqlite-database.js";
import { defaultScript, type FakeOpenAI, startFakeOpenAI } from "../fakes/openai-server.js";
import { type GatewayProcess, isBuilt, startGatewayProcess } from "../helpers/gateway-process.js";
import { waitFor } from "../helpers/wait-for.js";

const KEY = "e2e-idempotency-api-key";

let fake: FakeOpenAI;
let home: string;
let gateways: GatewayProcess[] = [];

beforeAll(() => {
  if (!isBuilt()) throw new Error("run `npm run build` first: these tests start bin/keel.js");
});

beforeEach(async () => {
  fake = await startFakeOpenAI();
  home = mkdtempSync(join(tmpdir(), "keel-e2e-idem-"));
});

afterEach(async () => {
  await Promise.all(gateways.map((g) => g.stop()));
  gateways = [];
  await fake.close();
  rmSync(home, { recursive: true, force: true });
});

/** A gateway on `home`, on a free port (a restart need not reuse the port: clients follow it). */
async function startGateway(): Promise<GatewayProcess> {
  const gateway = await startGatewayProcess({
    home,
    env: { OPENAI_BASE_URL: fake.baseUrl, KEEL_MODEL: "fake-model", KEEL_API_KEY: KEY },
  });
  gateways.push(gateway);
  await gateway.waitForReady();
  return gateway;
}

function post(gateway: GatewayProcess, body: unknown, key: string): Promise<Response> {
  return gateway.fetch("/v1/chat/completions", {
    method: "POST",
    headers: {
      "content-type": "application/json",
      authorization: `Bearer ${KEY}`,
      "Idempotency-Key": key,
    },
    body: JSON.stringify(body),
  });
}

function dataFrames(text: string): string[] {
  return text
    .split("\n")
    .filter((line) => line.startsWith("data: "))
    .map((line) => line.slice("data: ".length));
}

/** Reads a stream until its first data frame; `rest` resolves with everything once it ends. */
async function openStream(res: Response): Promise<{ first: string; rest: Promise<string> }> {
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let text = "";
  for (let i = 0; i < 100 && !text.includes("\n\n"); i++) {
    const { value, done } = await reader.read();
    if (done) break;
    text += decoder.decode(value, { stream: true });
  }
  const rest = (async () => {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return text;
      text += decoder.decode(value, { stream: true });
    }
  })();
  return { first: dataFrames(text)[0] ?? "", rest };
}

describe("a retry with the same Idempotency-Key after a restart", () => {
  for (const signal of ["SIGKILL", "SIGTERM"] as const) {
    it(`gets the resumed turn's reply when the first request was cut off by ${signal}`, async () => {
      // The first model call hangs until the process dies; the resumed one waits for the gate.
      let open!: () => void;
      const gate = new Promise<void>((resolve) => (open = resolve));
      fake.script(async (request) => {
        await gate;
        return defaultScript(request);
      });
      fake.hangNext();
      const body = { model: "fake-model", messages: [{ role: "user", content: "echo: survived" }] };

      const first = await startGateway();
      const cutOff = post(first, body, "across-restart").then(
        async (res) => ({
          status: res.status,
          retryAfter: res.headers.get("retry-after"),
          error: ((await res.json()) as { error?: { code: string } }).error,
        }),
        () => null,
      );
      await waitFor(() => fake.requests.length === 1, { message: "the first model call" });
      first.kill(signal);
      await first.waitForExit();
      const told = await cutOff;
      if (signal === "SIGTERM") {
        // The stop sequence answers the waiting client before the process ends.
        expect(told).toEqual({
          status: 503,
          retryAfter: "10",
          error: expect.objectContaining({ code: "gateway_stopping" }),
        });
      } else {
        expect(told).toBeNull();
      }

      const second = await startGateway();
      await waitFor(() => fake.requests.length === 2, { message: "the resumed turn's model call" });
      // The retry waits for the resumed turn (its stream is open, no text yet) ...
      const streamed = await post(second, { ...body, stream: true }, "across-restart");
      expect(streamed.status).toBe(200);
      const { first: roleFrame, rest } = await openStream(streamed);
      expect((JSON.parse(roleFrame) as OpenAI.ChatCompletionChunk).choices[0]!.delta.role).toBe(
        "assistant",
      );
      open();
      const frames = dataFrames(await rest);
      expect(frames.at(-1)).toBe("[DONE]");
      const text = frames
        .slice(0, -1)
        .map((f) => (JSON.parse(f) as OpenAI.ChatCompletionChunk).choices[0]?.delta.content ?? "")
        .join("");
      expect(text).toBe("survived");

      // ... and once it answered, a plain retry gets the same reply at once.
      const again = await post(second, body, "across-restart");
      expect(again.status).toBe(200);
      expect(((await again.json()) as OpenAI.ChatCompletion).choices[0]!.message.content).toBe(
        "survived",
      );
      const sessionId = again.headers.get("x-session-id")!;
      const stored = (await (await second.control(`/api/sessions/${sessionId}`)).json()) as {
        messages: { role: string; content: string | null }[];
      };
      expect(stored.messages.map((m) => `${m.role}:${m.content ?? ""}`)).toEqual([
        "user:echo: survived",
        "assistant:survived",
      ]);
      expect(fake.requests).toHaveLength(2);

      await second.terminate();
      const db = openSqliteDatabase(join(home, "state.db"), { readonly: true });
      const turns = db.prepare("SELECT inbox_id, state FROM turns ORDER BY id").all() as {
        inbox_id: number | null;
        state: string;
      }[];
      db.close();
      expect(turns).toEqual([
        { inbox_id: expect.any(Number), state: "interrupted" },
        { inbox_id: null, state: "done" },
      ]);
    });
  }
});
