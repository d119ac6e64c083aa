import { describe, expect, it } from "vitest";
import { RecordingAdapter } from "../../../test/helpers/recording-adapter.js";
import type {
  ChatAddress,
  InboundSink,
  OutboundReply,
  PlatformAdapter,
} from "../../contract/platform.js";
import { lazyAdapter } from "./lazy-adapter.js";

const address: ChatAddress = { platform: "chat", chatId: "1" };
const reply: OutboundReply = {
  outboxId: 1,
  sessionKey: "k",
  sessionId: "s",
  address,
  text: "hi",
  kind: "reply",
};
const sink: InboundSink = {
  receive: async () => ({ accepted: true, inboxId: 1, sessionId: "s" }),
};

/** A platform with typing and card updates, counting how often its module was "imported". */
class TypingAdapter extends RecordingAdapter {
  typing = 0;
  cards: string[] = [];
  showTyping(): () => void {
    this.typing += 1;
    return () => {};
  }
  async approvalAnswered(id: string, text: string): Promise<void> {
    this.cards.push(`${id}:${text}`);
  }
}

function lazyChat(calls: ("showTyping" | "approvalAnswered" | "fetchFile")[]) {
  const loaded: TypingAdapter[] = [];
  const Lazy = lazyAdapter<{ tag: string }>({
    name: "chat",
    label: "Chat",
    load: async () => {
      const adapter = new TypingAdapter("chat");
      loaded.push(adapter);
      return adapter;
    },
    calls,
  });
  return { adapter: new Lazy({ tag: "x" }) as PlatformAdapter, loaded };
}

describe("lazyAdapter", () => {
  it("loads nothing until started; meanwhile it is starting and keeps replies queued", async () => {
    const { adapter, loaded } = lazyChat(["showTyping", "fetchFile", "approvalAnswered"]);
    expect(adapter.name).toBe("chat");
    expect(loaded).toHaveLength(0);
    expect(adapter.status()).toEqual({ state: "starting", error: null });
    expect(adapter.connection?.()).toEqual({ state: "reconnecting", lastEventAt: null });
    await expect(adapter.deliver(reply)).rejects.toThrow(
      "Chat is not started yet; the reply stays queued.",
    );
    await expect(
      adapter.fetchFile!({ kind: "photo", ref: "f" }, 10, new AbortController().signal),
    ).rejects.toThrow("Chat is not started yet.");
    adapter.showTyping!(address)();
    await adapter.approvalAnswered!("a1", "done", address);
    expect(loaded).toHaveLength(0);
  });

  it("passes every call on once started", async () => {
    const { adapter, loaded } = lazyChat(["showTyping", "approvalAnswered"]);
    await adapter.start(sink);
    expect(loaded).toHaveLength(1);
    const inner = loaded[0]!;
    expect(adapter.status()).toEqual({ state: "connected", error: null });
    await adapter.deliver(reply);
    adapter.showTyping!(address)();
    await adapter.approvalAnswered!("a1", "done", address);
    expect([inner.texts(), inner.typing, inner.cards]).toEqual([["hi"], 1, ["a1:done"]]);
    await adapter.stop();
    expect(adapter.status()).toEqual({ state: "stopped", error: null });
  });

  it("offers only the optional calls its platform has", () => {
    const { adapter } = lazyChat([]);
    expect(adapter.showTyping).toBeUndefined();
    expect(adapter.fetchFile).toBeUndefined();
    expect(adapter.approvalAnswered).toBeUndefined();
  });
});
