/** The command line's common behaviour, in-process against temporary homes. */
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { type FakeOpenAI, startFakeOpenAI } from "../../test/fakes/openai-server.js";
import { runCliInProcess } from "../../test/helpers/cli-run.js";
import { freePort } from "../../test/helpers/gateway-process.js";
import { createTempDir } from "../../test/helpers/temp-home.js";
import { KEEL_VERSION } from "../lib/version.js";
import { MemoryFile } from "../memory/memory-file.js";
import { SqliteStore } from "../sessions/sqlite-store.js";

let dir: ReturnType<typeof createTempDir>;
beforeEach(() => {
  dir = createTempDir();
});
afterEach(() => dir.cleanup());

describe("keel", () => {
  it("--version prints the package version", async () => {
    const run = await runCliInProcess(["--version"]);
    expect(run.code).toBe(0);
    expect(run.out).toEqual([KEEL_VERSION]);
  });

  it("a subcommand's --help lists the global --home", async () => {
    for (const args of [
      ["gateway", "start", "--help"],
      ["sessions", "list", "--help"],
      ["doctor", "--help"],
    ]) {
      const run = await runCliInProcess(args);
      expect(run.code).toBe(0);
      expect(run.text).toMatch(/--home <dir>/);
    }
  });

  it("an unknown command exits non-zero", async () => {
    expect((await runCliInProcess(["nope"])).code).not.toBe(0);
  });

  it("a bad option value exits 2 and names the option", async () => {
    const run = await runCliInProcess(["--home", dir.path, "sessions", "list", "--limit", "lots"]);
    expect(run.code).toBe(2);
    expect(run.err.join("\n")).toContain("--limit");
  });
});

describe("keel sessions list", () => {
  it("hides Keel's internal sessions unless --all", async () => {
    const store = new SqliteStore(join(dir.path, "state.db"));
    await store.ensureSession("agent:main:telegram:dm:42", { platform: "telegram", chatId: "42" });
    await store.ensureSession("system:notices:telegram:42", { platform: "telegram", chatId: "42" });
    await store.close();
    const plain = await runCliInProcess(["--home", dir.path, "sessions", "list"]);
    expect(plain.code).toBe(0);
    expect(plain.text).toContain("agent:main:telegram:dm:42");
    expect(plain.text).not.toContain("system:notices");
    const all = await runCliInProcess(["--home", dir.path, "sessions", "list", "--all"]);
    expect(all.text).toContain("system:notices:telegram:42");
  });
});

describe("keel memory", () => {
  it("shows and clears one user's memory file, and refuses a name that is not <platform>-<id>", async () => {
    const file = new MemoryFile(dir.path, "telegram-4242");
    file.add("prefers metric units");
    new MemoryFile(dir.path, "telegram-7").add("another user's note");
    const show = await runCliInProcess(["--home", dir.path, "memory", "show", "telegram-4242"]);
    expect(show.code).toBe(0);
    expect(show.out).toEqual(["prefers metric units"]);

    const clear = await runCliInProcess(["--home", dir.path, "memory", "clear", "telegram-4242"]);
    expect(clear.out).toEqual(["Cleared the memory of telegram-4242."]);
    expect(file.read()).toBe("");
    expect(new MemoryFile(dir.path, "telegram-7").read()).toBe("another user's note\n");
    const empty = await runCliInProcess(["--home", dir.path, "memory", "show", "telegram-4242"]);
    expect(empty.out).toEqual(["telegram-4242 has no memory saved."]);

    const bad = await runCliInProcess(["--home", dir.path, "memory", "show", "../control_token"]);
    expect(bad.code).not.toBe(0);
    expect(bad.text).toMatch(/not a user/);
  });
});

describe("keel sessions show", () => {
  it("prints the whole transcript and marks where the model's summary stands in for it", async () => {
    const store = new SqliteStore(join(dir.path, "state.db"));
    const session = await store.ensureSession("agent:main:test:dm:1", null);
    const id = session.sessionId;
    await store.appendMessages(id, null, [
      { role: "user", content: "first question" },
      { role: "assistant", content: "first answer" },
    ]);
    const seqs = (await store.loadTranscript(id)).map((m) => m.seq);
    await store.appendMessages(id, null, [{ role: "user", content: "second question" }]);
    await store.recordCompaction({
      sessionId: id,
      turnId: null,
      throughSeq: seqs[1]!,
      summary: "The user asked a first question.",
      tokensBefore: 100,
      tokensAfter: 50,
      usage: null,
    });
    await store.close();
    const show = await runCliInProcess(["--home", dir.path, "sessions", "show", id]);
    expect(show.out.join("\n")).toContain(
      "assistant: first answer\n--- the model sees the messages above as this summary ---\n" +
        "The user asked a first question.\n---\nuser: second question",
    );
  });
});

describe("keel chat", () => {
  let fake: FakeOpenAI;
  beforeEach(async () => {
    fake = await startFakeOpenAI();
  });
  afterEach(async () => {
    await fake.close();
  });

  it("exits non-zero when the exchange fails (an unknown --session)", async () => {
    const env = {
      OPENAI_BASE_URL: fake.baseUrl,
      KEEL_MODEL: "fake-model",
      KEEL_HTTP_PORT: String(await freePort()),
    };
    const run = await runCliInProcess(["--home", dir.path, "chat", "--session", "nope"], {
      env,
      input: "echo: hi\n",
    });
    expect(run.err.join("\n")).toMatch(/error: /);
    expect(run.code).toBe(1);
  });
});
