import { describe, expect, it } from "vitest";
import { RecordingAdapter } from "../../test/helpers/recording-adapter.js";
import { PlatformRegistry } from "./registry.js";

class TypingAdapter extends RecordingAdapter {
  typed: string[] = [];
  showTyping(address: { chatId: string }): () => void {
    this.typed.push(address.chatId);
    return () => {};
  }
}

describe("PlatformRegistry", () => {
  it("answers which adapter serves an address, and routes live calls to it only", () => {
    const chat = new TypingAdapter("chat");
    const other = new RecordingAdapter("other");
    const platforms = new PlatformRegistry([chat, other]);
    expect(platforms.forAddress({ platform: "other", chatId: "1" })).toBe(other);
    expect(platforms.forAddress({ platform: "gone", chatId: "1" })).toBeUndefined();
    expect(platforms.all().map((a) => a.name)).toEqual(["chat", "other"]);
    platforms.showTyping({ platform: "chat", chatId: "7" })();
    platforms.showTyping({ platform: "other", chatId: "8" })();
    platforms.showTyping({ platform: "gone", chatId: "9" })();
    expect(chat.typed).toEqual(["7"]);
    expect(platforms.repliesInBand({ platform: "chat", chatId: "7" })).toBe(false);
  });

  it("reports each platform's connection health, from its status where it keeps none", async () => {
    const chat = new RecordingAdapter("chat");
    const platforms = new PlatformRegistry([chat]);
    expect(platforms.connections()).toEqual({ chat: { state: "disabled", lastEventAt: null } });
    await chat.start({ receive: async () => ({ accepted: true, inboxId: 1, sessionId: "s" }) });
    expect(platforms.connections()).toEqual({ chat: { state: "connected", lastEventAt: null } });
  });

  it("says so when a platform cannot fetch files", async () => {
    const platforms = new PlatformRegistry([new RecordingAdapter("chat")]);
    await expect(
      platforms.fetchFile("chat", { kind: "photo", ref: "x" }, 1, new AbortController().signal),
    ).rejects.toThrow("the chat platform cannot fetch files");
  });

  it("refuses two adapters with one name", () => {
    const platforms = new PlatformRegistry([new RecordingAdapter("chat")]);
    expect(() => platforms.add(new RecordingAdapter("chat"))).toThrow(
      'two platform adapters are named "chat"',
    );
  });
});
