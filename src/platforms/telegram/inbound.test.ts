import type { Message } from "grammy/types";
import { describe, expect, it } from "vitest";
import { normalizeCommand, toInboundMessage } from "./inbound.js";

const OPTIONS = { groupSessionsPerUser: false, botUsername: "keel_bot" };

function message(fields: Record<string, unknown>): Message {
  return {
    message_id: 10,
    date: 0,
    chat: { id: -100, type: "supergroup", title: "g" },
    from: { id: 5, is_bot: false, first_name: "Ada", last_name: "L" },
    ...fields,
  } as Message;
}

describe("toInboundMessage", () => {
  it("keys a reply thread by thread id but replies without a topic id", () => {
    const inbound = toInboundMessage(message({ text: "hi", message_thread_id: 3 }), OPTIONS);
    expect(inbound).toMatchObject({
      sessionKey: "agent:main:telegram:group:-100:3",
      senderName: "Ada L",
      address: { platform: "telegram", chatId: "-100", replyToMessageId: "10" },
    });
    expect(inbound?.address.threadId).toBeUndefined();
  });

  it("keeps the topic id for forum topics", () => {
    const inbound = toInboundMessage(
      message({ text: "hi", message_thread_id: 3, is_topic_message: true }),
      OPTIONS,
    );
    expect(inbound?.address.threadId).toBe("3");
  });

  it("skips messages without text and messages from bots", () => {
    expect(toInboundMessage(message({}), OPTIONS)).toBeNull();
    expect(
      toInboundMessage(
        message({ text: "x", from: { id: 1, is_bot: true, first_name: "b" } }),
        OPTIONS,
      ),
    ).toBeNull();
  });
});

describe("attachments", () => {
  it("takes the largest photo size with its caption", () => {
    const inbound = toInboundMessage(
      message({
        caption: "look",
        photo: [
          { file_id: "small", file_unique_id: "s", width: 90, height: 60, file_size: 900 },
          { file_id: "big", file_unique_id: "b", width: 1280, height: 853, file_size: 90_000 },
          { file_id: "mid", file_unique_id: "m", width: 320, height: 213, file_size: 9_000 },
        ],
      }),
      OPTIONS,
    );
    expect(inbound?.text).toBe("look");
    expect(inbound?.attachments).toEqual([
      { kind: "photo", ref: "big", name: "photo-10.jpg", mime: "image/jpeg", size: 90_000 },
    ]);
  });

  it("takes a voice note without text, and documents and audio with their names", () => {
    const voice = toInboundMessage(
      message({
        voice: { file_id: "v1", file_unique_id: "v", duration: 3, mime_type: "audio/ogg" },
      }),
      OPTIONS,
    );
    expect(voice?.text).toBe("");
    expect(voice?.attachments).toEqual([
      { kind: "voice", ref: "v1", name: "voice-10.ogg", mime: "audio/ogg" },
    ]);
    const doc = toInboundMessage(
      message({
        document: {
          file_id: "d1",
          file_unique_id: "d",
          file_name: "report.pdf",
          mime_type: "application/pdf",
          file_size: 26_214_400,
        },
      }),
      OPTIONS,
    );
    expect(doc?.attachments?.[0]).toMatchObject({
      kind: "document",
      name: "report.pdf",
      size: 26_214_400,
    });
    const audio = toInboundMessage(
      message({
        audio: { file_id: "a1", file_unique_id: "a", duration: 9, mime_type: "audio/mpeg" },
      }),
      OPTIONS,
    );
    expect(audio?.attachments?.[0]).toMatchObject({ kind: "audio", name: "audio-10.mpeg" });
  });
});

describe("other media", () => {
  it("keeps a video as a document and a sticker as its emoji", () => {
    const video = toInboundMessage(
      message({
        video: {
          file_id: "vid",
          file_unique_id: "u",
          width: 1,
          height: 1,
          duration: 1,
          mime_type: "video/mp4",
        },
      }),
      OPTIONS,
    );
    expect(video?.attachments?.[0]).toMatchObject({
      kind: "document",
      ref: "vid",
      mime: "video/mp4",
    });
    const sticker = toInboundMessage(
      message({
        sticker: {
          file_id: "s",
          file_unique_id: "s",
          type: "regular",
          width: 1,
          height: 1,
          is_animated: false,
          is_video: false,
          emoji: "👍",
        },
      }),
      OPTIONS,
    );
    expect(sticker?.text).toBe("[sticker 👍]");
  });
});

describe("normalizeCommand", () => {
  it("strips our own bot name and refuses other bots' commands", () => {
    expect(normalizeCommand("/new@Keel_Bot now", "keel_bot")).toBe("/new now");
    expect(normalizeCommand("/new@other", "keel_bot")).toBeNull();
    expect(normalizeCommand("plain @keel_bot", "keel_bot")).toBe("plain @keel_bot");
  });
});
