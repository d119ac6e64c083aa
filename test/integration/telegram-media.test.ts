import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect } from "vitest";
import { NO_VISION_NOTICE } from "../../src/runner/media-input.js";
import {
  defaultScript,
  type FakeChatRequest,
  imagePartsOf,
  lastUserText,
} from "../fakes/openai-server.js";
import {
  ALLOWED_USER,
  botMessages,
  type TelegramGatewayHarness,
} from "../helpers/in-process-gateway.js";
import { telegramTest } from "../helpers/telegram-test.js";
import { waitFor } from "../helpers/wait-for.js";

/** A 1x1 PNG. */
const PNG = Buffer.from(
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==",
  "base64",
);

/** Every file saved under the workspace inbox, by name. */
function inboxFiles(home: string): string[] {
  const root = join(home, "workspace", "inbox");
  if (!existsSync(root)) return [];
  return readdirSync(root).flatMap((session) =>
    readdirSync(join(root, session)).map((name) => join(root, session, name)),
  );
}

const botTexts = (h: TelegramGatewayHarness) =>
  botMessages(h.telegram, ALLOWED_USER).map((m) => m.text);

describe.concurrent("Telegram media through the real gateway", () => {
  telegramTest(
    "a photo with a caption reaches the model as an image part, downloaded once",
    async ({ h }) => {
      await h.start();
      const sent = h.telegram.sendUserFile({
        chatId: ALLOWED_USER,
        kind: "photo",
        bytes: PNG,
        caption: "what is this?",
      });
      await waitFor(() => botTexts(h).length > 0, { message: "a reply" });
      const request = h.model.requests.at(-1)!;
      expect(imagePartsOf(request)).toEqual([`data:image/jpeg;base64,${PNG.toString("base64")}`]);
      expect(lastUserText(request)).toContain("what is this?");
      expect(h.telegram.downloads(sent.file_id)).toBe(1);
      const saved = inboxFiles(h.home);
      expect(saved).toHaveLength(1);
      expect(readFileSync(saved[0]!)).toEqual(PNG);
      // Telegram's smaller sizes are never fetched.
      expect(h.telegram.downloads(`${sent.file_id}-thumb`)).toBe(0);
    },
  );

  telegramTest(
    "a voice note is transcribed once, echoed, and shown to the model as a transcript",
    async ({ h }) => {
      await h.start();
      const audio = Buffer.from("remind me to water the plants");
      h.telegram.sendUserFile({ chatId: ALLOWED_USER, kind: "voice", bytes: audio });
      await waitFor(() => botTexts(h).some((t) => t.startsWith("ok:")), { message: "a reply" });
      expect(h.model.transcriptions).toHaveLength(1);
      expect(h.model.transcriptions[0]).toMatchObject({ model: "whisper-1" });
      expect(h.model.transcriptions[0]!.bytes).toEqual(audio);
      const user = lastUserText(h.model.requests.at(-1)!);
      expect(user).toContain("Transcript of a voice note");
      expect(user).toContain("remind me to water the plants");
      // The echo comes before the answer.
      const texts = botTexts(h);
      expect(texts[0]).toBe("🎤 “remind me to water the plants”");
      expect(texts[1]!.startsWith("ok:")).toBe(true);
    },
  );

  telegramTest("a failed transcription gets a clear reply and keeps the audio", async ({ h }) => {
    await h.start();
    h.model.failTranscriptionNext(500);
    h.model.failTranscriptionNext(500);
    h.model.failTranscriptionNext(500);
    h.telegram.sendUserFile({ chatId: ALLOWED_USER, kind: "voice", bytes: Buffer.from("x") });
    await waitFor(() => botTexts(h).some((t) => t.startsWith("ok:")), { message: "a reply" });
    const notice = botTexts(h).find((t) => t.startsWith("⚠️ I could not transcribe"));
    expect(notice, JSON.stringify(botTexts(h))).toContain("voice-");
    expect(notice).toContain("HTTP 500");
    expect(inboxFiles(h.home)).toHaveLength(1);
    expect(lastUserText(h.model.requests.at(-1)!)).toContain("could not be transcribed");
  });

  telegramTest(
    "a 25 MB document gets a reply naming it, and its caption still goes through",
    async ({ h }) => {
      await h.start();
      const sent = h.telegram.sendUserFile({
        chatId: ALLOWED_USER,
        kind: "document",
        bytes: Buffer.from("tiny"),
        reportedSize: 25 * 1_048_576,
        fileName: "huge-report.pdf",
        mime: "application/pdf",
        caption: "echo: caption arrived",
      });
      await waitFor(() => botTexts(h).length >= 2, { message: "notice and reply" });
      const [notice, reply] = botTexts(h);
      expect(notice).toContain("huge-report.pdf is too large");
      expect(notice).toContain("20.0 MB");
      expect(reply).toContain("caption arrived");
      expect(lastUserText(h.model.requests.at(-1)!)).toContain("huge-report.pdf");
      // Refused from the size Telegram reported: never asked for.
      expect(h.telegram.sent.filter((c) => c.method === "getFile")).toEqual([]);
      expect(h.telegram.downloads(sent.file_id)).toBe(0);
    },
  );

  telegramTest(
    "a download that keeps failing gets a reply naming the file; the text goes through",
    async ({ h }) => {
      await h.start();
      for (let i = 0; i < 3; i++) h.telegram.failNext("downloadFile", { error_code: 502 });
      h.telegram.sendUserFile({
        chatId: ALLOWED_USER,
        kind: "document",
        bytes: Buffer.from("a,b\n1,2\n"),
        fileName: "data.csv",
        caption: "echo: text part",
      });
      await waitFor(() => botTexts(h).length >= 2, { message: "notice and reply" });
      expect(botTexts(h)[0]).toContain("I could not download data.csv");
      expect(botTexts(h)[1]).toContain("text part");
    },
  );

  telegramTest("a small text document is saved and shown inline with its path", async ({ h }) => {
    await h.start();
    h.telegram.sendUserFile({
      chatId: ALLOWED_USER,
      kind: "document",
      bytes: Buffer.from("alpha,beta\n1,2\n"),
      fileName: "numbers.csv",
      mime: "text/csv",
    });
    await waitFor(() => botTexts(h).length >= 1, { message: "a reply" });
    const user = lastUserText(h.model.requests.at(-1)!);
    expect(user).toContain("numbers.csv (text/csv, 15 B), saved at ");
    expect(user).toContain("alpha,beta");
    expect(inboxFiles(h.home)[0]).toMatch(/numbers\.csv$/);
  });

  telegramTest(
    "a document with a 300-byte non-ASCII name is saved under a name cut to fit, and answered",
    async ({ h }) => {
      await h.start();
      const fileName = `${"報告".repeat(50)}.csv`; // 304 bytes of UTF-8
      h.telegram.sendUserFile({
        chatId: ALLOWED_USER,
        kind: "document",
        bytes: Buffer.from("alpha,beta\n"),
        fileName,
        mime: "text/csv",
      });
      await waitFor(() => botTexts(h).length >= 1, { message: "a reply" });
      expect(botTexts(h)[0]).toMatch(/^ok:/);
      const user = lastUserText(h.model.requests.at(-1)!);
      expect(user).toContain("alpha,beta");
      const [saved] = inboxFiles(h.home);
      const savedName = saved!.split("/").at(-1)!;
      expect(Buffer.byteLength(savedName)).toBeLessThanOrEqual(255);
      expect(savedName).toMatch(/^\d+-0-(報告)+報?\.csv$/);
      expect(readFileSync(saved!, "utf8")).toBe("alpha,beta\n");
    },
  );

  telegramTest(
    "with model.vision false the model gets the path and the chat is told once, across restarts",
    async ({ h }) => {
      writeFileSync(join(h.home, "config.yaml"), "model:\n  vision: false\n");
      await h.start();
      h.telegram.sendUserFile({ chatId: ALLOWED_USER, kind: "photo", bytes: PNG });
      await waitFor(() => botTexts(h).some((t) => t.startsWith("ok:")), { message: "reply 1" });
      h.telegram.sendUserFile({ chatId: ALLOWED_USER, kind: "photo", bytes: PNG });
      await waitFor(() => botTexts(h).filter((t) => t.startsWith("ok:")).length === 2, {
        message: "reply 2",
      });
      await h.stop();
      await h.start();
      h.telegram.sendUserFile({ chatId: ALLOWED_USER, kind: "photo", bytes: PNG });
      await waitFor(() => botTexts(h).filter((t) => t.startsWith("ok:")).length === 3, {
        message: "reply 3",
      });
      expect(h.model.requests.flatMap(imagePartsOf)).toEqual([]);
      expect(lastUserText(h.model.requests.at(-1)!)).toContain("you cannot see it. It is saved at");
      expect(botTexts(h).filter((t) => t === NO_VISION_NOTICE)).toHaveLength(1);
    },
  );

  telegramTest("a model that refuses images gets the request again without them", async ({ h }) => {
    await h.start();
    let refused = 0;
    h.model.script((request: FakeChatRequest) => {
      if (imagePartsOf(request).length > 0) {
        refused++;
        return { error: { status: 400, message: "This model does not support image input." } };
      }
      return defaultScript(request);
    });
    h.telegram.sendUserFile({ chatId: ALLOWED_USER, kind: "photo", bytes: PNG, caption: "hi" });
    await waitFor(() => botTexts(h).some((t) => t.startsWith("ok:")), { message: "a reply" });
    // The notice is queued while the turn runs; it may arrive after the streamed reply.
    await waitFor(() => botTexts(h).includes(NO_VISION_NOTICE), { message: "the notice" });
    expect(refused).toBe(1);
    expect(lastUserText(h.model.requests.at(-1)!)).toContain("you cannot see it");
  });

  telegramTest(
    "send_file sends an image as a photo and other files as documents",
    async ({ h }) => {
      await h.start();
      const workspace = join(h.home, "workspace");
      mkdirSync(workspace, { recursive: true });
      writeFileSync(join(workspace, "chart.png"), PNG);
      writeFileSync(join(workspace, "notes.txt"), "plain notes");
      h.model.script((request) => {
        const text = lastUserText(request);
        const answered = request.messages.at(-1)?.role === "tool";
        const match = /^send: (\S+)/.exec(text);
        if (!match) return defaultScript(request);
        if (answered) return { text: `done ${match[1]}` };
        return {
          toolCalls: [{ name: "send_file", arguments: { path: match[1], caption: "here it is" } }],
        };
      });
      h.telegram.sendUserMessage({ chatId: ALLOWED_USER, text: "send: chart.png" });
      await waitFor(() => botTexts(h).includes("done chart.png"), { message: "photo turn" });
      h.telegram.sendUserMessage({ chatId: ALLOWED_USER, text: "send: notes.txt" });
      await waitFor(() => botTexts(h).includes("done notes.txt"), { message: "document turn" });
      const files = botMessages(h.telegram, ALLOWED_USER).filter((m) => m.file);
      expect(files.map((m) => [m.file!.method, m.file!.name, m.text])).toEqual([
        ["sendPhoto", "chart.png", "here it is"],
        ["sendDocument", "notes.txt", "here it is"],
      ]);
      expect(files[0]!.file!.bytes).toEqual(PNG);
      // The file goes out before the turn's reply text is written (sent or edited in place).
      const calls = h.telegram.sent.filter((c) => c.ok);
      const photo = calls.findIndex((c) => c.method === "sendPhoto");
      const reply = calls.findIndex((c) => String(c.payload.text ?? "").includes("done chart.png"));
      expect(photo).toBeGreaterThanOrEqual(0);
      expect(photo).toBeLessThan(reply);
    },
  );

  telegramTest("send_file refuses paths outside the working folder", async ({ h }) => {
    await h.start();
    h.model.script((request) =>
      request.messages.at(-1)?.role === "tool"
        ? { text: `tool said: ${String(request.messages.at(-1)!.content)}` }
        : { toolCalls: [{ name: "send_file", arguments: { path: "../control_token" } }] },
    );
    h.telegram.sendUserMessage({ chatId: ALLOWED_USER, text: "leak it" });
    await waitFor(() => botTexts(h).some((t) => t.startsWith("tool said:")), { message: "reply" });
    expect(botTexts(h).find((t) => t.startsWith("tool said:"))).toContain("Refused");
    expect(h.telegram.sent.filter((c) => c.method.startsWith("sendDocument"))).toEqual([]);
  });
});

describe.concurrent("Telegram media and /stop", () => {
  telegramTest("/stop during a download ends it without a turn", async ({ h }) => {
    await h.start();
    h.telegram.hangNext("getFile");
    h.telegram.sendUserFile({ chatId: ALLOWED_USER, kind: "photo", bytes: PNG, caption: "slow" });
    await h.telegram.waitForSent((c) => c.method === "getFile");
    h.telegram.sendUserMessage({ chatId: ALLOWED_USER, text: "/stop" });
    await waitFor(() => botTexts(h).includes("⏹ Stopped."), { message: "stopped notice" });
    h.telegram.sendUserMessage({ chatId: ALLOWED_USER, text: "echo: next" });
    await waitFor(() => botTexts(h).includes("next"), { message: "the next reply" });
    // The stopped photo never reached the model, and its message is not open any more.
    expect(h.model.requests.map(lastUserText).some((t) => t.includes("slow"))).toBe(false);
    expect(h.model.requests.flatMap(imagePartsOf)).toEqual([]);
  });

  telegramTest(
    "/new during a download leaves the old message out of the fresh session",
    async ({ h }) => {
      await h.start();
      h.telegram.hangNext("getFile");
      h.telegram.sendUserFile({
        chatId: ALLOWED_USER,
        kind: "photo",
        bytes: PNG,
        caption: "zebra-old",
      });
      await h.telegram.waitForSent((c) => c.method === "getFile");
      h.telegram.sendUserMessage({ chatId: ALLOWED_USER, text: "/new" });
      h.telegram.sendUserMessage({ chatId: ALLOWED_USER, text: "echo: fresh" });
      await waitFor(() => botTexts(h).includes("fresh"), { message: "the fresh reply" });
      const request = h.model.requests.at(-1)!;
      expect(JSON.stringify(request.messages)).not.toContain("zebra-old");
    },
  );
});
