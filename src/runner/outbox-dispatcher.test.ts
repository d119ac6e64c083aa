import { join } from "node:path";
import pino from "pino";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { RecordingAdapter } from "../../test/helpers/recording-adapter.js";
import { createTempDir } from "../../test/helpers/temp-home.js";
import { waitFor } from "../../test/helpers/wait-for.js";
import type { OutboundReply } from "../contract/platform.js";
import { SqliteStore } from "../sessions/sqlite-store.js";
import { OutboxDispatcher } from "./outbox-dispatcher.js";

/** A platform whose chat "stuck" never answers, like a wedged connection. */
class StuckChatAdapter extends RecordingAdapter {
  override deliver(reply: OutboundReply): Promise<void> {
    if (reply.address.chatId === "stuck") return new Promise(() => {});
    return super.deliver(reply);
  }
}

describe("OutboxDispatcher", () => {
  let dir: ReturnType<typeof createTempDir>;
  let store: SqliteStore;
  let dispatcher: OutboxDispatcher;

  beforeEach(() => {
    dir = createTempDir();
    store = new SqliteStore(join(dir.path, "state.db"));
    dispatcher = new OutboxDispatcher({
      store,
      logger: pino({ level: "silent" }),
      crashPoint: () => {},
      retryDelayMs: 20,
    });
  });
  afterEach(async () => {
    dispatcher.stop();
    await store.close();
    dir.cleanup();
  });

  async function queue(chatId: string, text: string): Promise<void> {
    const address = { platform: "test", chatId };
    const session = await store.ensureSession(`k:${chatId}`, address);
    await store.enqueueOutbox({
      sessionKey: `k:${chatId}`,
      sessionId: session.sessionId,
      address,
      text,
      kind: "reply",
    });
  }

  it("keeps serving other chats while one chat's delivery hangs", async () => {
    const adapter = new StuckChatAdapter();
    dispatcher.register(adapter);
    await queue("stuck", "never");
    dispatcher.kick();
    await queue("a", "one");
    dispatcher.kick();
    await queue("a", "two");
    dispatcher.kick();
    await waitFor(() => adapter.texts("a").length === 2);
    expect(adapter.texts("a")).toEqual(["one", "two"]);
  });

  it("delivers a chat's rows in order, retrying a failed one before the next", async () => {
    const adapter = new RecordingAdapter();
    adapter.failNext = 2;
    dispatcher.register(adapter);
    await queue("a", "first");
    await queue("a", "second");
    dispatcher.kick();
    // The platform has a reply before its "delivered" mark is committed: wait for the mark, not
    // for the text (checking the rows right after the text was seen raced that commit).
    await waitFor(async () => (await store.listPendingOutbox()).length === 0, {
      timeoutMs: 10_000,
      message: "both rows marked delivered",
    });
    expect(adapter.texts("a")).toEqual(["first", "second"]);
  });
});
