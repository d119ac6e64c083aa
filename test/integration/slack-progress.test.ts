/**
 * Progress people can see on Slack, through the real gateway in this process, the stand-in Slack
 * and a fake model that streams slowly: the reply shows while it is written (`chat.update` at
 * most once a second per channel, a 429 honoured), tool lines show while tools run and are gone
 * at the end, and `display.streaming: false` posts the reply as before.
 */
import { describe, expect } from "vitest";
import type { Gateway } from "../../src/gateway/gateway.js";
import { type FakeSlack, startFakeSlack } from "../fakes/slack-server.js";
import { platformTest } from "../helpers/platform-test.js";
import { waitFor } from "../helpers/wait-for.js";

const OWNER = "UOWNER";
const DM = "D1";
const WRITES = ["chat.postMessage", "chat.update", "chat.delete"];

/** A reply of `count` sentences, streamed one piece at a time. */
function sentences(count: number): string {
  return Array.from({ length: count }, (_, i) => `Sentence number ${i + 1} is here.`).join(" ");
}

/** What a test starts; each test has its own, so the tests run at once (they mostly wait). */
interface Fixtures {
  slack: FakeSlack;
  /** Starts the gateway, with `yaml` as its config.yaml when given; stopped after the test. */
  start: (yaml?: string) => Promise<Gateway>;
  /** Calls that change what the DM shows (posts, updates, deletions), in order. */
  writes: () => FakeSlack["calls"];
  bot: () => ReturnType<FakeSlack["botMessages"]>;
  ask: (text: string) => ReturnType<FakeSlack["userPosts"]>;
}

const test = platformTest.extend<Fixtures>({
  // biome-ignore lint/correctness/noEmptyPattern: vitest reads a fixture's dependencies from this pattern
  slack: async ({}, use) => {
    const slack = await startFakeSlack();
    await use(slack);
    await slack.close();
  },
  start: async ({ launch, slack }, use) =>
    use((yaml) =>
      launch(
        "slack",
        {
          SLACK_APP_TOKEN: slack.appToken,
          SLACK_BOT_TOKEN: slack.botToken,
          SLACK_API_ROOT: slack.apiRoot,
          SLACK_ALLOWED_USERS: OWNER,
        },
        yaml,
      ),
    ),
  writes: async ({ slack }, use) =>
    use(() =>
      slack.calls.filter((c) => WRITES.includes(c.method) && String(c.args.channel) === DM),
    ),
  bot: async ({ slack }, use) => use(() => slack.botMessages(DM)),
  ask: async ({ slack }, use) => use((text) => slack.userPosts({ channel: DM, user: OWNER, text })),
});

describe.concurrent("Slack progress", () => {
  test("shows the reply long before it ends, updated in place at most once a second", async ({
    model,
    start,
    writes,
    bot,
    ask,
  }) => {
    const reply = sentences(40);
    model.script({ text: reply, chunkDelayMs: 60 });
    await start();
    ask("write a lot");
    const early = await waitFor(() => bot()[0], { timeoutMs: 15_000 });
    expect(reply.startsWith(early.text)).toBe(true);
    expect(early.text.length).toBeLessThan(reply.length);
    const final = await waitFor(() => (bot()[0]?.text === reply ? bot()[0] : null), {
      timeoutMs: 30_000,
    });
    expect(bot()).toHaveLength(1);
    expect(final!.earlier?.length ?? 0).toBeGreaterThanOrEqual(2);
    for (const text of final!.earlier ?? []) expect(reply.startsWith(text)).toBe(true);
    const log = writes();
    expect(log.filter((c) => c.method === "chat.postMessage")).toHaveLength(1);
    // Tier 3: no two writes to the channel closer than a second.
    for (let i = 1; i < log.length; i++) {
      expect(log[i]!.at - log[i - 1]!.at).toBeGreaterThanOrEqual(990);
    }
  });

  test("honours a 429 on an update: the next waits Retry-After, no replacement message", async ({
    model,
    slack,
    start,
    writes,
    bot,
    ask,
  }) => {
    const reply = sentences(40);
    model.script({ text: reply, chunkDelayMs: 60 });
    slack.fail("chat.update", { kind: "rate_limited", retryAfter: 3 });
    await start();
    ask("write a lot");
    await waitFor(() => bot()[0]?.text === reply, { timeoutMs: 30_000 });
    const updates = writes().filter((c) => c.method === "chat.update");
    const refused = updates.findIndex((c) => c.outcome === "rate_limited");
    expect(refused).toBeGreaterThanOrEqual(0);
    const next = updates[refused + 1];
    expect(next).toBeDefined();
    expect(next!.at - updates[refused]!.at).toBeGreaterThanOrEqual(2990);
    expect(writes().filter((c) => c.method === "chat.postMessage")).toHaveLength(1);
    expect(bot()).toHaveLength(1);
  });

  test("shows a line per tool call while tools run, gone once the reply is final", async ({
    model,
    start,
    bot,
    ask,
  }) => {
    model.script([
      { toolCalls: [{ name: "terminal", arguments: { command: "sleep 1.5; echo hi" } }] },
      { text: "The command said hi." },
    ]);
    await start();
    ask("run it");
    const during = await waitFor(() => bot()[0], { timeoutMs: 15_000 });
    expect(during.text).toBe("⚙️ terminal: `sleep 1.5; echo hi`");
    await waitFor(() => bot()[0]?.text === "The command said hi.", { timeoutMs: 15_000 });
    expect(bot()).toHaveLength(1);
    expect(bot()[0]!.earlier?.[0]).toBe("⚙️ terminal: `sleep 1.5; echo hi`");
  });

  test("streaming false and tool progress off: one post with the reply, no updates", async ({
    model,
    start,
    writes,
    bot,
    ask,
  }) => {
    model.script({ text: sentences(20), chunkDelayMs: 25 });
    const gateway = await start("display:\n  streaming: false\n  tool_progress: off\n");
    ask("write");
    await waitFor(() => bot().length === 1, { timeoutMs: 30_000 });
    await waitFor(async () => (await gateway.store.listPendingOutbox()).length === 0);
    expect(bot()[0]!.text).toBe(sentences(20));
    expect(writes().map((c) => c.method)).toEqual(["chat.postMessage"]);
    // The usual reply, with its outbox metadata for the read-back.
    expect(bot()[0]!.metadata?.event_type).toBe("keel_outbox");
  });

  test("streaming false with tool lines: the status message is removed, the reply posted alone", async ({
    model,
    start,
    writes,
    bot,
    ask,
  }) => {
    model.script([
      { toolCalls: [{ name: "terminal", arguments: { command: "sleep 1.5; echo hi" } }] },
      { text: "Done with it." },
    ]);
    await start("display:\n  streaming: false\n");
    ask("run it");
    await waitFor(() => bot()[0]?.text.startsWith("⚙️"), { timeoutMs: 15_000 });
    await waitFor(
      () =>
        bot()
          .map((m) => m.text)
          .join() === "Done with it.",
      {
        timeoutMs: 15_000,
      },
    );
    expect(writes().filter((c) => c.method === "chat.delete")).toHaveLength(1);
  });

  test("a final piece posted anew whose answer was lost is found by its metadata, not posted twice", async ({
    model,
    slack,
    start,
    bot,
    ask,
  }) => {
    model.script([
      { toolCalls: [{ name: "terminal", arguments: { command: "sleep 1.5; echo hi" } }] },
      { text: "Posted exactly once." },
    ]);
    const gateway = await start("display:\n  streaming: false\n");
    ask("run it");
    await waitFor(() => bot()[0]?.text.startsWith("⚙️"), { timeoutMs: 15_000 });
    // The reply is posted, but the connection drops before Slack's answer: uncertain.
    slack.fail("chat.postMessage", { kind: "drop_after" });
    await waitFor(
      () => slack.calls.some((c) => c.method === "conversations.history" && c.outcome === "ok"),
      { timeoutMs: 20_000, message: "the retry read the conversation back" },
    );
    await waitFor(async () => (await gateway.store.listPendingOutbox()).length === 0, {
      timeoutMs: 15_000,
      message: "row delivered",
    });
    expect(bot().map((m) => m.text)).toEqual(["Posted exactly once."]);
    expect(bot()[0]!.metadata?.event_type).toBe("keel_outbox");
    expect(slack.calls.filter((c) => c.method === "chat.postMessage")).toHaveLength(2);
  });
});
