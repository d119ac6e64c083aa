/**
 * Time to first token where people watch a reply grow: `/v1` streaming, the web chat's WebSocket
 * and Telegram's preview message, each against the model's own first token measured direct in the
 * same run (interleaved). The stand-in model streams a first sentence at once and the rest after a
 * pause, so what is timed is the first token's way through the gateway, not the whole answer.
 * The gateway is the BUILT one in a child process, on its shipped defaults.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import WebSocket from "ws";
import { startFakeOpenAI } from "../test/fakes/openai-server.js";
import { startFakeTelegram } from "../test/fakes/telegram-server.js";
import { freePort } from "../test/helpers/gateway-process.js";
import { GatewayChild } from "./gateway-child.js";
import { HttpClient } from "./http-client.js";
import { median, spread, verdict } from "./stats.js";

export interface FirstTokenOptions {
  /** Timed samples per surface, after WARMUP_ROUNDS untimed ones (the gateway's code warms up). */
  samples: number;
}

export interface FirstTokenResult {
  samples: number;
  /** The model's own time to first token, direct (p50 over every round). */
  directMs: number;
  /** Each surface's p50, and that minus the direct p50. */
  /** `missed`: timed rounds in which no text came through that surface. */
  surfaces: { name: "v1" | "webchat" | "telegram"; p50: number; added: number; missed: number }[];
}

/** The first piece ends a sentence, so Telegram's preview shows it at once (stream-editor.ts). */
const PIECES = ["Hello there.", " And", " the", " rest."];
const PIECE_DELAY_MS = 20;
const TOKEN = "123456:FIRSTTOKEN";
const PATH = "/v1/chat/completions";
const BODY = { model: "bench-model", messages: [{ role: "user", content: "hi" }], stream: true };
const HAS_TEXT = (text: string) => /"content":"[^"]/.test(text);
const TIMEOUT_MS = 10_000;
const WARMUP_ROUNDS = 50;
/** Issue 42, step 3: what the gateway adds to the first token, on every surface. */
const TARGET_ADDED_MS = 2;

export async function runFirstToken(options: FirstTokenOptions): Promise<FirstTokenResult> {
  const model = await startFakeOpenAI();
  model.script({ pieces: PIECES, chunkDelayMs: PIECE_DELAY_MS });
  const telegram = await startFakeTelegram({ token: TOKEN });
  const rounds = options.samples + WARMUP_ROUNDS;
  const chatIds = Array.from({ length: rounds }, (_, i) => 7_000_000 + i);
  const home = mkdtempSync(join(tmpdir(), "keel-bench-ttft-"));
  const gateway = GatewayChild.spawn({
    home,
    port: await freePort(),
    env: {
      OPENAI_BASE_URL: model.baseUrl,
      KEEL_MODEL: "bench-model",
      TELEGRAM_BOT_TOKEN: TOKEN,
      TELEGRAM_API_ROOT: telegram.apiRoot,
      TELEGRAM_ALLOWED_USERS: chatIds.join(","),
    },
    outputFile: join(home, "gateway.log"),
  });
  const direct = new HttpClient(model.baseUrl.replace(/\/v1$/, ""));
  let through: HttpClient | null = null;
  let ws: WebSocket | null = null;
  try {
    await gateway.waitReady();
    // The control token exists once the gateway is up.
    through = new HttpClient(gateway.baseUrl, gateway.authHeaders());
    const v1 = through;
    ws = await openChat(gateway);
    const chat = ws;
    const times = {
      direct: [] as number[],
      v1: [] as number[],
      webchat: [] as number[],
      telegram: [] as number[],
    };
    for (let i = 0; i < rounds; i += 1) {
      const round = {
        direct: (await direct.postStream(PATH, BODY, HAS_TEXT)).ms,
        v1: (await v1.postStream(PATH, BODY, HAS_TEXT)).ms,
        webchat: await webchatFirstToken(chat, `ttft-${i}`),
        telegram: await telegramFirstToken(telegram, chatIds[i]!),
      };
      if (i < rounds - options.samples) continue;
      // A round with no text seen (NaN) is counted as missed, not timed.
      for (const [name, ms] of Object.entries(round)) {
        if (Number.isFinite(ms)) times[name as keyof typeof times].push(ms);
      }
    }
    const directMs = median(times.direct);
    const surface = (name: "v1" | "webchat" | "telegram") => {
      const p50 = median(times[name]);
      return { name, p50, added: p50 - directMs, missed: options.samples - times[name].length };
    };
    return {
      samples: options.samples,
      directMs,
      surfaces: [surface("v1"), surface("webchat"), surface("telegram")],
    };
  } finally {
    ws?.close();
    direct.close();
    through?.close();
    await gateway.stop();
    await telegram.close();
    await model.close();
    rmSync(home, { recursive: true, force: true });
  }
}

async function openChat(gateway: GatewayChild): Promise<WebSocket> {
  const ws = new WebSocket(`${gateway.baseUrl.replace("http", "ws")}/ws`, [
    "keel.v1",
    `keel.token.${gateway.controlToken()}`,
  ]);
  await new Promise<void>((resolve, reject) => {
    ws.once("open", () => resolve());
    ws.once("error", reject);
  });
  return ws;
}

/**
 * Sends a message to a new conversation (which subscribes the socket to it) and times the first
 * `delta` frame; resolves once the turn has ended, so rounds do not overlap.
 */
function webchatFirstToken(ws: WebSocket, conversation: string): Promise<number> {
  return new Promise((resolve, reject) => {
    let first = Number.NaN;
    const timer = setTimeout(
      () => done(new Error(`web chat: no turn end in ${conversation}`)),
      TIMEOUT_MS,
    );
    const onFrame = (data: WebSocket.RawData) => {
      const frame = JSON.parse(String(data)) as { type: string; conversation_id?: string };
      if (frame.conversation_id !== conversation) return;
      if (frame.type === "delta" && Number.isNaN(first)) first = performance.now() - start;
      if (frame.type === "error") done(new Error(`web chat: ${String(data)}`));
      if (frame.type === "turn_end") done(null);
    };
    const done = (err: Error | null) => {
      clearTimeout(timer);
      ws.off("message", onFrame);
      if (err) reject(err);
      else resolve(first);
    };
    ws.on("message", onFrame);
    const start = performance.now();
    ws.send(
      JSON.stringify({ type: "send", conversation_id: conversation, client_id: "m1", text: "hi" }),
    );
  });
}

/**
 * A user's message into the stand-in Bot API and the time to the bot's first message with the
 * first sentence (the preview). The rest of the answer is edited in at Telegram's pace (a second
 * later in a private chat): each round has a chat of its own, so that does not hold the next.
 */
async function telegramFirstToken(
  telegram: Awaited<ReturnType<typeof startFakeTelegram>>,
  chatId: number,
): Promise<number> {
  const start = performance.now();
  telegram.sendUserMessage({ chatId, text: "hi" });
  await telegram.waitForSent(
    (call) =>
      call.method === "sendMessage" &&
      call.ok &&
      String(call.payload.chat_id) === String(chatId) &&
      String(call.payload.text).includes(PIECES[0]!),
    TIMEOUT_MS,
  );
  return performance.now() - start;
}

/** The section's report: each surface's added p50 beside the target (the median of the runs). */
export function firstTokenReport(results: FirstTokenResult[]): string {
  const ms = (values: number[]) => spread(values, 2);
  const lines = [
    `Time to first token, added by the gateway (built gateway in a child process; first streamed`,
    `sentence at once, the rest ${PIECE_DELAY_MS} ms a piece; ${results[0]!.samples} samples a surface a run, interleaved with the model direct)`,
  ];
  const labels = {
    v1: "/v1 streaming",
    webchat: "web chat (WebSocket delta)",
    telegram: "Telegram preview message",
  };
  for (const [i, surface] of results[0]!.surfaces.entries()) {
    const added = results.map((r) => r.surfaces[i]!.added);
    const sorted = [...added].sort((a, b) => a - b);
    const med = sorted[Math.ceil(sorted.length / 2) - 1]!;
    lines.push(
      `  ${`added p50, ${labels[surface.name]}`.padEnd(40)} ${ms(added)} ms   target ${verdict(med, TARGET_ADDED_MS, true)}`,
      `    (first token: through the gateway ${ms(results.map((r) => r.surfaces[i]!.p50))} ms, model alone ${ms(results.map((r) => r.directMs))} ms; rounds with no text: ${results.map((r) => r.surfaces[i]!.missed).join(", ")})`,
    );
  }
  return lines.join("\n");
}
