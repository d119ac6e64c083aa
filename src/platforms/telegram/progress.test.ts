/**
 * The leftovers of a previous process, as the Telegram adapter finds them when it connects:
 * previews recorded in the store (a real SQLite store) and shown by the stand-in Bot API.
 */
import { join } from "node:path";
import { pino } from "pino";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { type FakeTelegram, startFakeTelegram } from "../../../test/fakes/telegram-server.js";
import { createTempDir } from "../../../test/helpers/temp-home.js";
import { waitFor } from "../../../test/helpers/wait-for.js";
import type { ChatAddress } from "../../contract/platform.js";
import { SqliteStore } from "../../sessions/sqlite-store.js";
import { INTERRUPTED_MARK } from "../stream-editor.js";
import { TelegramAdapter } from "./adapter.js";

const TOKEN = "123456:progress-token";
const CHAT = 42;
const address: ChatAddress = { platform: "telegram", chatId: String(CHAT) };

describe("Telegram progress leftovers", () => {
  let dir: ReturnType<typeof createTempDir>;
  let store: SqliteStore;
  let telegram: FakeTelegram;
  let adapter: TelegramAdapter | null = null;

  beforeEach(async () => {
    dir = createTempDir();
    store = new SqliteStore(join(dir.path, "state.db"));
    telegram = await startFakeTelegram({ token: TOKEN });
  });
  afterEach(async () => {
    await adapter?.stop();
    adapter = null;
    await telegram.close();
    await store.close();
    dir.cleanup();
  });

  /** A turn that showed `text` in a preview, ended in `state`, with no reply waiting. */
  async function leftover(text: string, state: "done" | "interrupted"): Promise<number> {
    const { item } = await store.acceptInbound({
      platform: "telegram",
      chatId: String(CHAT),
      platformMessageId: text,
      sessionKey: `agent:main:telegram:dm:${CHAT}`,
      text,
      address,
    });
    const turn = await store.startTurn({
      sessionKey: item.sessionKey,
      inboxId: item.id,
      userMessage: { role: "user", content: text },
      origin: address,
    });
    const response = await fetch(`${telegram.apiRoot}/bot${TOKEN}/sendMessage`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ chat_id: CHAT, text }),
    });
    const sent = (await response.json()) as { result: { message_id: number } };
    const messageId = String(sent.result.message_id);
    await store.saveStreamMessage({
      turnId: turn.id,
      piece: 0,
      address,
      messageId,
      text,
      state: "open",
    });
    await store.finishTurn({ turnId: turn.id, state, finalMessage: null, reply: null });
    return turn.id;
  }

  function start(): TelegramAdapter {
    adapter = new TelegramAdapter({
      token: TOKEN,
      apiRoot: telegram.apiRoot,
      allowedUsers: [String(CHAT)],
      groupSessionsPerUser: false,
      pairing: store,
      logger: pino({ level: "silent" }),
      timing: { pollTimeoutSec: 1, stopTimeoutMs: 1_000 },
      progress: { settings: { streaming: true, toolProgress: "compact" }, store },
    });
    void adapter.start({ receive: async () => ({ accepted: true, inboxId: 1, sessionId: "s" }) });
    return adapter;
  }

  it("marks a cut-off preview when it connects, and leaves an answered one as it is", async () => {
    const cut = await leftover("Half of an answ", "interrupted");
    const answered = await leftover("A whole answer.", "done");
    start();
    await waitFor(async () => (await store.listLeftoverStreams("telegram")).length === 0, {
      message: "leftovers handled",
    });
    const texts = telegram.chatLog(CHAT).map((m) => m.text);
    expect(texts).toEqual([`Half of an answ${INTERRUPTED_MARK}`, "A whole answer."]);
    expect((await store.getStreamTurn(cut)).messages[0]!.state).toBe("interrupted");
    // An answered turn's text is not called interrupted, and is not edited at all.
    expect((await store.getStreamTurn(answered)).messages[0]!.state).toBe("final");
    expect(telegram.sent.filter((c) => c.method === "editMessageText")).toHaveLength(1);
  });
});
