/**
 * Conversations that last: a real in-process gateway against the stand-in model with an 8k-token
 * window (it answers 400 context_length_exceeded past it, like OpenAI). Older turns are
 * summarised and recorded, a fact from the first turn survives hundreds of turns through the
 * summaries, and the chat commands about context, models and memory answer.
 */
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { type FakeOpenAI, fakePromptTokens, startFakeOpenAI } from "../fakes/openai-server.js";
import {
  type InProcessGateway,
  startInProcessGateway,
  testSessionKey,
} from "../helpers/in-process-gateway.js";
import { createTempDir } from "../helpers/temp-home.js";
import { waitFor } from "../helpers/wait-for.js";

const WINDOW = 8192;

describe("context budget, compaction, memory and usage in the gateway", () => {
  let home: ReturnType<typeof createTempDir> | undefined;
  let model: FakeOpenAI | undefined;
  let gw: InProcessGateway | undefined;

  afterEach(async () => {
    await gw?.shutdown();
    await model?.close();
    home?.cleanup();
    gw = undefined;
    model = undefined;
    home = undefined;
  });

  async function start(env: Record<string, string> = {}, contextLength = WINDOW) {
    home = createTempDir("keel-context-");
    model = await startFakeOpenAI({ contextLength });
    gw = await startInProcessGateway({ home: home.path, modelBaseUrl: model.baseUrl, env });
    return gw;
  }

  /** Sends a message and waits for the chat's next reply; returns it. */
  async function ask(g: InProcessGateway, text: string, chatId = "1"): Promise<string> {
    const before = g.platform.texts(chatId).length;
    await g.send(text, chatId);
    await waitFor(() => g.platform.texts(chatId).length > before, {
      timeoutMs: 20_000,
      message: `a reply to ${JSON.stringify(text)}`,
    });
    return g.platform.texts(chatId).at(-1)!;
  }

  it("300 turns with large tool outputs on an 8k model: no turn fails, the first turn's fact is recalled at the end", async () => {
    const g = await start();
    expect(await ask(g, "remember: codeword=heron")).toBe("ok: remember: codeword=heron");
    for (let i = 2; i < 300; i++) {
      // Every third turn prints 6,000 characters (about 1,500 tokens) through the terminal tool.
      const reply = await ask(g, i % 3 === 0 ? "big: 6000" : `echo: turn ${i}`);
      expect(reply, `turn ${i}`).toBe(i % 3 === 0 ? "big done" : `turn ${i}`);
    }
    expect(await ask(g, "recall: codeword")).toBe("recalled: heron");

    // No request the gateway sent was refused for its size, and none passed the budget.
    const turnRequests = model!.requests.filter(
      (r) => !/summari[sz]e/i.test(JSON.stringify(r.messages.at(-1))),
    );
    const sizes = turnRequests.map(fakePromptTokens);
    expect(Math.max(...sizes)).toBeLessThanOrEqual(WINDOW);
    const summaries = model!.requests.length - turnRequests.length;
    expect(summaries).toBeGreaterThan(3);

    // The compactions are recorded; the full transcript stays in the store.
    const session = await g.gateway.store.getSession(testSessionKey("1"));
    const compaction = await g.gateway.store.latestCompaction(session!.sessionId);
    expect(compaction?.summary).toContain("remember: codeword=heron");
    const transcript = await g.gateway.store.loadTranscript(session!.sessionId);
    expect(transcript.filter((m) => m.message.role === "user")).toHaveLength(300);
    expect(compaction!.throughSeq).toBeGreaterThan(transcript.length / 2);
  }, 240_000);

  it("a model that refuses a prompt as too long (context_length_exceeded) gets a compaction and one more try", async () => {
    // The configured window is larger than the model's real one (4096), so Keel's own budget
    // lets prompts through that the model refuses.
    const g = await start({ KEEL_CONTEXT_WINDOW: "6000" }, 4096);
    await ask(g, "remember: river=loire");
    for (let i = 0; i < 12; i++) expect(await ask(g, "big: 2000")).toBe("big done");
    const refused = model!.requests.filter((r) => fakePromptTokens(r) > 4096);
    expect(refused.length).toBeGreaterThan(0);
    const session = await g.gateway.store.getSession(testSessionKey("1"));
    expect(await g.gateway.store.latestCompaction(session!.sessionId)).not.toBeNull();
    expect(await ask(g, "recall: river")).toBe("recalled: loire");
  }, 60_000);

  it("a model that reports no usage: the tokens are estimated and marked so", async () => {
    home = createTempDir("keel-context-");
    model = await startFakeOpenAI({ usage: false });
    gw = await startInProcessGateway({ home: home.path, modelBaseUrl: model.baseUrl });
    await ask(gw, "echo: uncounted");
    const session = await gw.gateway.store.getSession(testSessionKey("1"));
    const totals = await gw.gateway.store.sessionUsage(session!.sessionId);
    expect(totals).toMatchObject({ calls: 1, estimatedCalls: 1 });
    expect(totals.promptTokens).toBeGreaterThan(0);
    expect(await ask(gw, "/usage")).toMatch(/\(1 calls estimated: the model reported no usage\)/);
  }, 60_000);

  it("/usage reports tokens from the model's usage and how full the context is; /compact summarises by hand and says what it saved", async () => {
    const g = await start({}, 32_768);
    await ask(g, "remember: colour=teal");
    await ask(g, "big: 4000");
    await ask(g, "echo: third");
    const usage = await ask(g, "/usage");
    expect(usage).toMatch(
      /^Usage of this conversation: 4 model calls, [\d,]+ tokens in, [\d,]+ out\.$/m,
    );
    expect(usage).toMatch(/Context: about [\d,]+ of 32,768 tokens \(\d+%\)/);
    const session = await g.gateway.store.getSession(testSessionKey("1"));
    const totals = await g.gateway.store.sessionUsage(session!.sessionId);
    expect(totals.promptTokens).toBeGreaterThan(0);
    expect(totals.estimatedCalls).toBe(0);

    // The control API (and the dashboard's transcript view) shows the session's usage.
    const res = await fetch(`${g.url}/api/sessions/${session!.sessionId}`, {
      headers: { authorization: `Bearer ${g.controlToken}` },
    });
    const shown = (await res.json()) as { usage: Record<string, number>; compaction: unknown };
    expect(shown.usage).toMatchObject({
      calls: 4,
      prompt_tokens: totals.promptTokens,
      completion_tokens: totals.completionTokens,
    });
    expect(shown.compaction).toBeNull();

    const compacted = await ask(g, "/compact");
    expect(compacted).toMatch(
      /^Compacted: .* from about [\d,]+ to [\d,]+ tokens \(saved about [\d,]+\)\.$/,
    );
    const summaryRequest = model!.requests.at(-1)!;
    expect(JSON.stringify(summaryRequest.messages.at(-1))).toContain("summarise");
    expect(await ask(g, "recall: colour")).toBe("recalled: teal");
    // The newest exchange is kept verbatim, the rest is the summary in the system prompt.
    const last = model!.requests.at(-1)!;
    expect(String(last.messages[0]!.content)).toContain("Summary of the earlier part");
    expect(last.messages.some((m) => m.content === "remember: colour=teal")).toBe(false);
  }, 60_000);

  it("/model lists the models and switches this session; a failing main model falls back; /status shows the calls", async () => {
    home = createTempDir("keel-context-");
    model = await startFakeOpenAI();
    const backup = await startFakeOpenAI({ model: "backup-model" });
    try {
      writeFileSync(
        join(home.path, "config.yaml"),
        `model:\n  max_retries: 1\n  fallbacks:\n    - base_url: ${backup.baseUrl}\n      name: backup-model\n`,
      );
      const g = await startInProcessGateway({ home: home.path, modelBaseUrl: model.baseUrl });
      gw = g;
      expect(await ask(g, "/model")).toContain("▶ fake-model (main)\n• backup-model (fallback)");
      expect(await ask(g, "/model nope")).toContain('There is no model "nope"');

      // The main model answers 503 twice (the call and its one retry): the fallback answers.
      model.failNext(503, undefined, { "retry-after": "0" });
      model.failNext(503, undefined, { "retry-after": "0" });
      expect(await ask(g, "echo: through the fallback")).toBe("through the fallback");
      expect(backup.requests).toHaveLength(1);
      const status = await ask(g, "/status");
      expect(status).toContain("fake-model #1: HTTP 503 → retry in 0.0 s");
      expect(status).toContain("fake-model #2: HTTP 503 → backup-model");
      expect(status).toContain("backup-model #1: ok");

      expect(await ask(g, "/model backup-model")).toBe("This conversation now uses backup-model.");
      expect(await ask(g, "echo: on the backup")).toBe("on the backup");
      expect(backup.requests).toHaveLength(2);
      expect(await ask(g, "/model")).toContain("▶ backup-model (fallback)");
    } finally {
      await backup.close();
    }
  }, 60_000);

  it("memory: the memory tool writes the sender's own file, it reaches only that user's sessions, and /memory shows it", async () => {
    const g = await start({}, 32_768);
    expect(await ask(g, "memorise: remember: pet=otter", "1")).toMatch(/^memorised: Saved/);
    const file = join(home!.path, "memory", "test-1.md");
    expect(readFileSync(file, "utf8")).toBe("remember: pet=otter\n");
    // A fresh conversation of the same user still knows it (system prompt), another user does not.
    await ask(g, "/new", "1");
    expect(await ask(g, "recall: pet", "1")).toBe("recalled: otter");
    expect(await ask(g, "recall: pet", "2")).toBe("recalled: nothing");
    expect(existsSync(join(home!.path, "memory", "test-2.md"))).toBe(false);
    const otherPrompt = model!.requests.at(-1)!;
    expect(JSON.stringify(otherPrompt)).not.toContain("otter");
    expect(await ask(g, "/memory", "1")).toBe(
      "Your memory (20 of 4096 bytes):\nremember: pet=otter",
    );
    expect(await ask(g, "/memory", "2")).toBe("Your memory is empty.");

    // In a group, user 1's memory is neither in the prompt nor shown, and the tool is off.
    const inGroup = async (text: string, id: string) => {
      const before = g.platform.texts("g1").length;
      await g.gateway.runner.receive({
        platform: "test",
        chatId: "g1",
        platformMessageId: id,
        sessionKey: "agent:main:test:group:g1",
        senderId: "1",
        text,
        address: { platform: "test", chatId: "g1" },
      });
      await waitFor(() => g.platform.texts("g1").length > before, { message: `reply to ${text}` });
      return g.platform.texts("g1").at(-1)!;
    };
    expect(await inGroup("recall: pet", "g-1")).toBe("recalled: nothing");
    expect(JSON.stringify(model!.requests.at(-1))).not.toContain("otter");
    expect(await inGroup("/memory", "g-2")).toMatch(/used only in direct chats/);
    await inGroup("memorise: remember: secret=none", "g-3");
    expect(readFileSync(file, "utf8")).toBe("remember: pet=otter\n");
  }, 60_000);
});
