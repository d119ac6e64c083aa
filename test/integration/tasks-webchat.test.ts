/**
 * Tasks in the web chat, through the real gateway's WebSocket: a waiting `delegate` answers in
 * the conversation, `/bg` is acknowledged and its result arrives as its own event, once.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { type FakeOpenAI, startFakeOpenAI } from "../fakes/openai-server.js";
import { type InProcessGateway, startInProcessGateway } from "../helpers/in-process-gateway.js";
import { createTempDir } from "../helpers/temp-home.js";
import { waitFor } from "../helpers/wait-for.js";

const CONVERSATION = "tasks-conversation";

let model: FakeOpenAI;
let home: ReturnType<typeof createTempDir>;
let gw: InProcessGateway;

beforeEach(async () => {
  model = await startFakeOpenAI();
  home = createTempDir("keel-tasks-webchat-");
  gw = await startInProcessGateway({
    home: home.path,
    modelBaseUrl: model.baseUrl,
    env: { KEEL_WEBCHAT_ENABLED: "true" },
  });
});

afterEach(async () => {
  await gw.shutdown();
  await model.close();
  home.cleanup();
});

async function connect() {
  const ws = new WebSocket(`${gw.url.replace("http", "ws")}/ws`, [
    "keel.v1",
    `keel.token.${gw.controlToken}`,
  ]);
  const frames: Record<string, unknown>[] = [];
  ws.on("message", (data) => frames.push(JSON.parse(String(data)) as Record<string, unknown>));
  await new Promise<void>((resolve, reject) => {
    ws.once("open", () => resolve());
    ws.once("error", reject);
  });
  ws.send(JSON.stringify({ type: "open", conversation_id: CONVERSATION, after_seq: 0 }));
  await waitFor(() => frames.some((f) => f.type === "synced"));
  let sent = 0;
  const say = (text: string) => {
    sent += 1;
    ws.send(
      JSON.stringify({ type: "send", conversation_id: CONVERSATION, client_id: `c${sent}`, text }),
    );
  };
  /** What the page shows from the bot: replies and notices, by sequence, each once. */
  const seen = () => {
    const bySeq = new Map<number, string>();
    for (const f of frames) {
      if (f.type === "event" && (f.kind === "reply" || f.kind === "notice")) {
        bySeq.set(Number(f.seq), String(f.text));
      }
    }
    return [...bySeq.entries()].sort(([a], [b]) => a - b).map(([, text]) => text);
  };
  return { ws, say, seen };
}

describe("tasks in the web chat", () => {
  it("delegate answers in the conversation; /bg is acknowledged and its result comes once", async () => {
    const page = await connect();
    const wait = (predicate: (t: string) => boolean, what: string) =>
      waitFor(() => page.seen().find(predicate), {
        timeoutMs: 10_000,
        message: `${what}; seen: ${JSON.stringify(page.seen())}`,
      });
    page.say("delegate: echo: web child");
    await wait((t) => t === "delegated: web child", "the delegate's answer");
    page.say("/bg echo: web background");
    await wait((t) => /^🧵 task \d+ started$/.test(t), "the acknowledgement");
    await wait((t) => /^🧵 task \d+ done\nweb background$/.test(t), "the result");
    expect(page.seen().filter((t) => t.includes("web child"))).toHaveLength(1);
    expect(page.seen().filter((t) => t.includes("web background"))).toHaveLength(1);
    page.ws.close();
  });
});
