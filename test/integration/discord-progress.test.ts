/**
 * Progress people can see on Discord, through the real gateway in this process, the stand-in
 * Discord and a fake model that streams slowly: the reply shows while it is written (edited in
 * place at most once a second per channel, a 429 honoured), tool lines show while tools run and
 * are gone at the end, and `display.streaming: false` sends the reply as before.
 */
import { describe, expect } from "vitest";
import type { Gateway } from "../../src/gateway/gateway.js";
import { type FakeDiscord, type FakeUser, startFakeDiscord } from "../fakes/discord-server.js";
import { platformTest } from "../helpers/platform-test.js";
import { waitFor } from "../helpers/wait-for.js";

const TOKEN = "discord-progress-token";
const USER: FakeUser = { id: "200000000000000001", username: "owner" };

/** A reply of `count` sentences, streamed one piece at a time. */
function sentences(count: number): string {
  return Array.from({ length: count }, (_, i) => `Sentence number ${i + 1} is here.`).join(" ");
}

/** What a test starts; each test has its own, so the tests run at once (they mostly wait). */
interface Fixtures {
  discord: FakeDiscord;
  /** The owner's DM channel. */
  dm: string;
  /** Starts the gateway, with `yaml` as its config.yaml when given; stopped after the test. */
  start: (yaml?: string) => Promise<Gateway>;
  /** Message writes to the DM channel (posts, edits, deletions), in order. */
  writes: () => FakeDiscord["requestLog"][number][];
  ask: (content: string) => ReturnType<FakeDiscord["userSends"]>;
}

const test = platformTest.extend<Fixtures>({
  // biome-ignore lint/correctness/noEmptyPattern: vitest reads a fixture's dependencies from this pattern
  discord: async ({}, use) => {
    const discord = await startFakeDiscord({ token: TOKEN });
    await use(discord);
    await discord.close();
  },
  dm: async ({ discord }, use) => use(discord.dmChannel(USER.id)),
  start: async ({ launch, discord }, use) =>
    use((yaml) =>
      launch(
        "discord",
        {
          DISCORD_BOT_TOKEN: TOKEN,
          DISCORD_API_ROOT: discord.apiRoot,
          DISCORD_ALLOWED_USERS: USER.id,
        },
        yaml,
      ),
    ),
  writes: async ({ discord, dm }, use) =>
    use(() => discord.requestLog.filter((r) => r.path.startsWith(`/channels/${dm}/messages`))),
  ask: async ({ discord, dm }, use) =>
    use((content) => discord.userSends({ channelId: dm, user: USER, content })),
});

describe.concurrent("Discord progress", () => {
  test("shows the reply long before it ends, edited in place at most once a second", async ({
    model,
    discord,
    dm,
    start,
    writes,
    ask,
  }) => {
    const reply = sentences(40);
    model.script({ text: reply, chunkDelayMs: 60 });
    await start();
    ask("write a lot");
    const early = await waitFor(() => discord.botMessages(dm)[0], { timeoutMs: 15_000 });
    expect(reply.startsWith(early.content)).toBe(true);
    expect(early.content.length).toBeLessThan(reply.length);
    const final = await waitFor(
      () => {
        const [message] = discord.botMessages(dm);
        return message?.content === reply ? message : null;
      },
      { timeoutMs: 30_000 },
    );
    expect(discord.botMessages(dm)).toHaveLength(1);
    expect(final.earlier?.length ?? 0).toBeGreaterThanOrEqual(2);
    for (const text of final.earlier ?? []) expect(reply.startsWith(text)).toBe(true);
    const log = writes();
    expect(log.filter((r) => r.method === "POST")).toHaveLength(1);
    // 5 edits per 5 s per channel: no two writes closer than a second.
    for (let i = 1; i < log.length; i++) {
      expect(log[i]!.at - log[i - 1]!.at).toBeGreaterThanOrEqual(990);
    }
  });

  test("honours a 429 on an edit: the next edit waits retry_after, no replacement message", async ({
    model,
    discord,
    dm,
    start,
    writes,
    ask,
  }) => {
    const reply = sentences(40);
    model.script({ text: reply, chunkDelayMs: 60 });
    discord.failEdits(1, 3);
    await start();
    ask("write a lot");
    await waitFor(() => discord.botMessages(dm)[0]?.content === reply, { timeoutMs: 30_000 });
    const edits = writes().filter((r) => r.method === "PATCH");
    const refused = edits.findIndex((r) => r.status === 429);
    expect(refused).toBeGreaterThanOrEqual(0);
    const next = edits[refused + 1];
    expect(next).toBeDefined();
    expect(next!.at - edits[refused]!.at).toBeGreaterThanOrEqual(2990);
    expect(writes().filter((r) => r.method === "POST")).toHaveLength(1);
    expect(discord.botMessages(dm)).toHaveLength(1);
  });

  test("shows a line per tool call while tools run, gone once the reply is final", async ({
    model,
    discord,
    dm,
    start,
    ask,
  }) => {
    model.script([
      { toolCalls: [{ name: "terminal", arguments: { command: "sleep 1.5; echo hi" } }] },
      { text: "The command said hi." },
    ]);
    await start();
    ask("run it");
    const during = await waitFor(() => discord.botMessages(dm)[0], { timeoutMs: 15_000 });
    expect(during.content).toBe("⚙️ terminal: `sleep 1.5; echo hi`");
    await waitFor(() => discord.botMessages(dm)[0]?.content === "The command said hi.", {
      timeoutMs: 15_000,
    });
    expect(discord.botMessages(dm)).toHaveLength(1);
    // The final reply is an edit of the message that showed the tool line.
    expect(discord.botMessages(dm)[0]!.earlier?.[0]).toBe("⚙️ terminal: `sleep 1.5; echo hi`");
  });

  test("streaming false and tool progress off: one post with the reply, no edits", async ({
    model,
    discord,
    dm,
    start,
    writes,
    ask,
  }) => {
    model.script({ text: sentences(20), chunkDelayMs: 25 });
    const gateway = await start("display:\n  streaming: false\n  tool_progress: off\n");
    ask("write");
    await waitFor(() => discord.botMessages(dm).length === 1, { timeoutMs: 30_000 });
    await waitFor(async () => (await gateway.store.listPendingOutbox()).length === 0);
    expect(discord.botMessages(dm)[0]!.content).toBe(sentences(20));
    expect(discord.botMessages(dm)[0]!.earlier).toBeUndefined();
    expect(writes().filter((r) => r.method !== "POST")).toEqual([]);
    // The usual reply: its nonce makes a resend return this message.
    expect(discord.botMessages(dm)[0]!.nonce).toMatch(/^k\d+\.0$/);
  });

  test("streaming false with tool lines: the status message is removed, the reply posted alone", async ({
    model,
    discord,
    dm,
    start,
    writes,
    ask,
  }) => {
    model.script([
      { toolCalls: [{ name: "terminal", arguments: { command: "sleep 1.5; echo hi" } }] },
      { text: "Done with it." },
    ]);
    await start("display:\n  streaming: false\n");
    ask("run it");
    await waitFor(() => discord.botMessages(dm)[0]?.content.startsWith("⚙️"), {
      timeoutMs: 15_000,
    });
    await waitFor(
      () =>
        discord
          .botMessages(dm)
          .map((m) => m.content)
          .join() === "Done with it.",
      {
        timeoutMs: 15_000,
      },
    );
    expect(writes().filter((r) => r.method === "DELETE")).toHaveLength(1);
  });

  test("a final piece posted anew carries its nonce: a lost answer and a resend post it once", async ({
    model,
    discord,
    dm,
    start,
    writes,
    ask,
  }) => {
    const reply = sentences(150);
    model.script([
      { toolCalls: [{ name: "terminal", arguments: { command: "sleep 1.5; echo hi" } }] },
      { text: reply },
    ]);
    await start("display:\n  streaming: false\n");
    ask("run it");
    await waitFor(() => discord.botMessages(dm)[0]?.content.startsWith("⚙️"), {
      timeoutMs: 15_000,
    });
    // The first piece of the reply is created, but its answer is lost (500): it is sent again.
    discord.failSends(1, "500-after-create");
    await waitFor(
      () =>
        discord
          .botMessages(dm)
          .map((m) => m.content)
          .join(" ") === reply,
      {
        timeoutMs: 30_000,
        message: `reply; chat: ${JSON.stringify(discord.botMessages(dm).map((m) => m.content))}`,
      },
    );
    const pieces = discord.botMessages(dm);
    expect(pieces.length).toBeGreaterThanOrEqual(3);
    const [first] = pieces;
    expect(first!.nonce).toMatch(/^k\d+\.0$/);
    pieces.forEach((m, i) => {
      expect(m.nonce).toBe(first!.nonce!.replace(/0$/, String(i)));
    });
    // The piece whose answer was lost was posted again (and Discord gave back the same message).
    const posts = writes().filter((r) => r.method === "POST");
    expect(posts.length).toBeGreaterThan(pieces.length + 1);
  });

  test("a mention in a server channel streams into the thread started for it", async ({
    model,
    discord,
    start,
  }) => {
    const reply = sentences(30);
    model.script({ text: reply, chunkDelayMs: 50 });
    await start();
    const channel = discord.createGuildChannel();
    const asked = discord.userSends({
      channelId: channel,
      user: USER,
      content: "write a lot",
      mentionBot: true,
    });
    // The thread has the message's id; the preview, its edits and the final all happen there.
    await waitFor(() => discord.botMessages(asked.id)[0]?.content === reply, {
      timeoutMs: 30_000,
      message: `thread reply; threads: ${JSON.stringify(discord.allBotMessages())}`,
    });
    expect(discord.channel(asked.id)?.parent_id).toBe(channel);
    expect(discord.botMessages(asked.id)).toHaveLength(1);
    expect(discord.botMessages(asked.id)[0]!.earlier?.length ?? 0).toBeGreaterThanOrEqual(1);
    expect(discord.botMessages(channel)).toEqual([]);
  });
});
