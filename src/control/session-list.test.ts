import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createTempDir } from "../../test/helpers/temp-home.js";
import type { InboundMessage } from "../contract/platform.js";
import { queueNotice } from "../sessions/notices.js";
import { SqliteStore } from "../sessions/sqlite-store.js";
import { listSessionsJson } from "./session-list.js";

describe("the dashboard's session list", () => {
  let dir: ReturnType<typeof createTempDir>;
  let store: SqliteStore;

  beforeEach(() => {
    dir = createTempDir();
    store = new SqliteStore(join(dir.path, "state.db"));
  });
  afterEach(async () => {
    await store.close();
    dir.cleanup();
  });

  function message(chat: string, text: string, id: string, kind = "dm"): InboundMessage {
    return {
      platform: "telegram",
      chatId: chat,
      platformMessageId: id,
      sessionKey: `agent:main:telegram:${kind}:${chat}`,
      text,
      senderId: "7",
      senderName: "Alice Example",
      address: { platform: "telegram", chatId: chat },
    };
  }

  /** One answered message with the tokens its model call used. */
  async function exchange(m: InboundMessage, prompt: number, completion: number) {
    const { item } = await store.acceptInbound(m);
    const turn = await store.startTurn({
      sessionKey: m.sessionKey,
      inboxId: item.id,
      userMessage: { role: "user", content: m.text },
      origin: m.address,
    });
    await store.finishTurn({
      turnId: turn.id,
      state: "done",
      finalMessage: { role: "assistant", content: "ok" },
      usage: { model: "m", promptTokens: prompt, completionTokens: completion, estimated: false },
      reply: null,
    });
  }

  it("titles, states, tokens and cost per session and in total; Keel's own lanes on request", async () => {
    await exchange(message("42", "what is the weather", "1"), 1_000_000, 500_000);
    await exchange(message("-100", "plan the offsite", "2", "group"), 2_000_000, 0);
    await queueNotice(store, { address: { platform: "telegram", chatId: "42" }, text: "notice" });
    const deps = {
      store,
      runningKeys: () => ["agent:main:telegram:group:-100"],
      pendingApprovals: async () => [],
      prices: { input_per_mtok: 3, output_per_mtok: 15 },
    };
    const { sessions, total_usage } = await listSessionsJson(deps, { limit: 10, internal: false });
    const byKey = Object.fromEntries(sessions.map((s) => [s.key, s]));
    expect(Object.keys(byKey).sort()).toEqual([
      "agent:main:telegram:dm:42",
      "agent:main:telegram:group:-100",
    ]);
    // A direct chat is named after the person; a group after what it is about.
    expect(byKey["agent:main:telegram:dm:42"]).toMatchObject({
      title: "Alice Example",
      first_message: "what is the weather",
      state: "idle",
      usage: { prompt_tokens: 1_000_000, completion_tokens: 500_000, cost: 10.5 },
    });
    expect(byKey["agent:main:telegram:group:-100"]).toMatchObject({
      title: "plan the offsite",
      state: "running",
      usage: { prompt_tokens: 2_000_000, completion_tokens: 0, cost: 6 },
    });
    expect(total_usage).toMatchObject({
      calls: 2,
      prompt_tokens: 3_000_000,
      completion_tokens: 500_000,
      cost: 16.5,
    });

    const all = await listSessionsJson(
      { ...deps, prices: undefined },
      { limit: 10, internal: true },
    );
    expect(all.sessions.map((s) => s.key)).toContain("system:notices:telegram:42");
    expect(all.total_usage.cost).toBeNull();
  });
});
