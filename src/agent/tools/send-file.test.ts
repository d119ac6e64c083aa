import { mkdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createTempDir } from "../../../test/helpers/temp-home.js";
import { createHomeGuard } from "./home-guard.js";
import { createSendFileTool } from "./send-file.js";
import type { ToolContext } from "./tool.js";

describe("send_file", () => {
  let dir: ReturnType<typeof createTempDir>;
  let home: string;
  let cwd: string;
  let context: ToolContext;

  beforeEach(() => {
    dir = createTempDir();
    home = join(dir.path, "home");
    cwd = join(home, "workspace");
    mkdirSync(cwd, { recursive: true });
    context = {
      cwd,
      signal: new AbortController().signal,
      chat: { platform: "telegram", chatId: "1" },
    };
  });
  afterEach(() => dir.cleanup());

  const tool = () =>
    createSendFileTool({ guard: createHomeGuard(home), filesDir: join(home, "files") });

  it("copies the file into the file store and hands it over with its caption", async () => {
    writeFileSync(join(cwd, "chart.png"), "png-bytes");
    const out = await tool().execute({ path: "chart.png", caption: "Q3" }, context);
    expect(out.isError).toBe(false);
    const sent = out.sentFile!;
    expect(sent.caption).toBe("Q3");
    expect(sent.file).toMatchObject({ name: "chart.png", mime: "image/png", size: 9 });
    expect(sent.file.path).toBe(join(home, "files", sent.file.id));
    expect(readFileSync(sent.file.path, "utf8")).toBe("png-bytes");
    expect(out.output).toContain(`/files/${sent.file.id}`);
  });

  it("refuses what it must not send, without handing over a file", async () => {
    writeFileSync(join(home, "control_token"), "secret");
    mkdirSync(join(cwd, "folder"));
    writeFileSync(join(cwd, "empty.txt"), "");
    writeFileSync(join(dir.path, "outside.txt"), "x");
    symlinkSync(join(dir.path, "outside.txt"), join(cwd, "link.txt"));
    const cases: [string, string][] = [
      ["../control_token", "inside the Keel home"],
      ["../../outside.txt", "outside the working folder"],
      ["link.txt", "outside the working folder"],
      ["missing.txt", "No such file"],
      ["folder", "not a regular file"],
      ["empty.txt", "empty"],
    ];
    for (const [path, why] of cases) {
      const out = await tool().execute({ path }, context);
      expect(out.isError, path).toBe(true);
      expect(out.output, path).toContain(why);
      expect(out.sentFile, path).toBeUndefined();
    }
    const { chat: _chat, ...noChat } = context;
    const out = await tool().execute({ path: "empty.txt" }, noChat);
    expect(out.output).toContain("no chat");
  });

  it("hands a file over on WhatsApp, whose adapter uploads it", async () => {
    writeFileSync(join(cwd, "chart.png"), "png-bytes");
    const out = await tool().execute(
      { path: "chart.png" },
      { ...context, chat: { platform: "whatsapp", chatId: "15550001111" } },
    );
    expect(out.isError).toBe(false);
    expect(out.sentFile?.file).toMatchObject({ name: "chart.png", mime: "image/png" });
  });

  it("refuses on platforms that cannot carry a file yet, so the model does not think it went", async () => {
    writeFileSync(join(cwd, "chart.png"), "png-bytes");
    for (const platform of ["discord", "slack"]) {
      const out = await tool().execute(
        { path: "chart.png" },
        { ...context, chat: { platform, chatId: "1" } },
      );
      expect(out.isError, platform).toBe(true);
      expect(out.output, platform).toContain(`cannot be sent to ${platform}`);
      expect(out.sentFile, platform).toBeUndefined();
    }
  });
});
