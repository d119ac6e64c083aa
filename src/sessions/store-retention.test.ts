/** The store contract for the data lifecycle (issue 41), on every implementation (store.test.ts). */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { storeHarnesses } from "../../test/helpers/store-harness.js";
import { FORGOTTEN_TEXT, PRUNED_TOOL_OUTPUT, type RetentionCutoffs, type Store } from "./store.js";

const DAY = 86_400_000;
const dm = (user: string) => `agent:main:telegram:dm:${user}`;
const GROUP = "agent:main:telegram:group:-100";

describe.each(storeHarnesses())("the $name store: retention and erasure", (harness) => {
  let store: Store;
  let now = 0;
  let messageId = 0;

  beforeEach(async () => {
    await harness.setup();
    now = 1_000 * DAY;
    store = await harness.open(() => now);
  });
  afterEach(async () => {
    await store.close();
    await harness.teardown();
  });

  /** One message from `user` in `chat`, accepted; the turn started when `start`. */
  async function say(user: string, text: string, key = dm(user), chat = user) {
    messageId += 1;
    const { item } = await store.acceptInbound({
      platform: "telegram",
      chatId: chat,
      platformMessageId: String(messageId),
      sessionKey: key,
      text,
      senderId: user,
      senderName: `name-${user}`,
      address: { platform: "telegram", chatId: chat },
    });
    return item;
  }

  /** A whole answered exchange with one tool call, its usage recorded. */
  async function exchange(user: string, text: string, key = dm(user), chat = user) {
    const item = await say(user, text, key, chat);
    const turn = await store.startTurn({
      sessionKey: key,
      inboxId: item.id,
      userMessage: { role: "user", content: text },
      origin: { platform: "telegram", chatId: chat },
    });
    const call = `call-${item.id}`;
    await store.appendMessages(turn.sessionId, turn.id, [
      {
        role: "assistant",
        content: null,
        tool_calls: [
          {
            id: call,
            type: "function",
            function: { name: "terminal", arguments: '{"command":"ls"}' },
          },
        ],
      },
    ]);
    const base = { toolCallId: call, turnId: turn.id, sessionId: turn.sessionId };
    await store.recordToolStart({ ...base, name: "terminal", arguments: '{"command":"ls"}' });
    await store.recordToolFinish({ ...base, result: `secret listing of ${user}` });
    const reply = await store.finishTurn({
      turnId: turn.id,
      state: "done",
      finalMessage: { role: "assistant", content: `answer to ${text}` },
      reply: { address: { platform: "telegram", chatId: chat }, text: `answer to ${text}` },
      usage: { model: "m", promptTokens: 100, completionTokens: 10, estimated: false },
    });
    if (reply) await store.markDelivered(reply.id);
    return turn;
  }

  /** Old history for five people; four of them have work in progress of some kind. */
  async function history() {
    await exchange("1", "old words of one");
    await exchange("2", "old words of two");
    await exchange("3", "old words of three");
    await exchange("4", "old words of four");
    // Work in progress, as old as the rest: a running turn, a pending message, an approval.
    const item = await say("2", "still running");
    await store.startTurn({
      sessionKey: dm("2"),
      inboxId: item.id,
      userMessage: { role: "user", content: "still running" },
    });
    await say("3", "waiting in the inbox");
    const t4 = await exchange("4", "needs approval");
    await store.requestApproval({
      id: "appr0001",
      sessionKey: dm("4"),
      sessionId: t4.sessionId,
      turnId: t4.id,
      toolCallId: "call-x",
      toolName: "terminal",
      arguments: "{}",
      summary: "rm -rf x",
      rule: "r",
      reason: "r",
      address: { platform: "telegram", chatId: "4" },
      requester: "telegram:4",
      asker: "telegram:4",
      grants: [],
      deadlineAt: now + 1_000 * DAY,
    });
    now += 40 * DAY;
  }

  const cutoffs = (days: number): RetentionCutoffs => ({
    transcriptsBefore: now - days * DAY,
    toolOutputBefore: now - days * DAY,
  });

  async function pruneAll(c: RetentionCutoffs, dryRun: boolean) {
    let messages = 0;
    let toolOutputs = 0;
    let after: string | null = null;
    for (let round = 0; round < 50; round += 1) {
      const ids = await store.pruneCandidates(c, after, 2);
      if (ids.length === 0) break;
      for (const id of ids) {
        const counts = await store.pruneTranscript(id, c, dryRun);
        messages += counts.messages;
        toolOutputs += counts.toolOutputs;
      }
      after = ids[ids.length - 1]!;
    }
    return { messages, toolOutputs };
  }

  const bodies = async () =>
    (await harness.rows("SELECT body FROM messages ORDER BY seq")).map((r) => String(r.body));

  it("prunes old transcripts but never one with work in progress; a dry run changes nothing", async () => {
    await history();
    const before = await bodies();
    const usage = await store.totalUsage();
    const listed = await store.listSessions();
    const dry = await pruneAll(cutoffs(30), true);
    expect(dry.messages).toBe(4);
    expect(await bodies()).toEqual(before);
    expect(await store.listSessions()).toEqual(listed);

    const real = await pruneAll(cutoffs(30), false);
    expect(real).toEqual(dry);
    const left = (await bodies()).join("\n");
    expect(left).not.toContain("old words of one");
    for (const kept of [
      "old words of two",
      "still running",
      "old words of three",
      "needs approval",
    ]) {
      expect(left).toContain(kept);
    }
    // Usage totals survive the messages they were spent on.
    expect(await store.totalUsage()).toEqual(usage);
    // The sessions list shows what is left of the pruned transcript (nothing), tokens kept.
    expect((await store.listSessions()).find((x) => x.key === dm("1"))).toMatchObject({
      messageCount: 0,
      firstMessage: null,
      lastMessage: null,
      promptTokens: 100,
      completionTokens: 10,
    });
    // A second run finds nothing more.
    expect((await pruneAll(cutoffs(30), false)).messages).toBe(0);
  });

  it("keeps recent messages, and replaces old tool results with a marker, journal rows kept", async () => {
    await exchange("1", "old");
    now += 10 * DAY;
    await exchange("1", "recent");
    now += 1 * DAY;
    await pruneAll({ toolOutputBefore: now - 5 * DAY }, false);
    const results = await harness.rows(
      "SELECT name, arguments, result FROM tool_calls ORDER BY id",
    );
    expect(results).toEqual([
      { name: "terminal", arguments: '{"command":"ls"}', result: PRUNED_TOOL_OUTPUT },
      { name: "terminal", arguments: '{"command":"ls"}', result: "secret listing of 1" },
    ]);
    await pruneAll({ transcriptsBefore: now - 5 * DAY }, false);
    const left = await store.loadTranscript((await store.getSession(dm("1")))!.sessionId);
    expect(left[0]?.message).toEqual({ role: "user", content: "recent" });
    expect(left).toHaveLength(4);
    // The sessions list counts what is left: its first user message is the kept one.
    expect((await store.listSessions())[0]).toMatchObject({
      messageCount: 4,
      firstMessage: "recent",
      lastMessage: "answer to recent",
      promptTokens: 200,
    });
  });

  it("removes idle sessions whole, leaving held and scheduled ones", async () => {
    await history();
    const usage = await store.totalUsage();
    const sessionsBefore = (await store.countSessions()).total;
    const idle = await store.idleSessions(now - 30 * DAY, null, 100);
    expect(idle.sort()).toEqual([dm("1"), dm("2"), dm("3"), dm("4")]);
    const dry = await store.pruneSession(dm("1"), now - 30 * DAY, true);
    expect(dry).toMatchObject({ sessions: 1, transcripts: 1, inbox: 1, outbox: 1 });
    expect(await store.getSession(dm("1"))).not.toBeNull();
    for (const key of idle) await store.pruneSession(key, now - 30 * DAY, false);
    expect(await store.getSession(dm("1"))).toBeNull();
    for (const user of ["2", "3", "4"]) expect(await store.getSession(dm(user))).not.toBeNull();
    expect(
      await harness.rows("SELECT * FROM inbox WHERE session_key = 'agent:main:telegram:dm:1'"),
    ).toEqual([]);
    // What the sessions list kept of its transcript goes with it; the others' stays.
    const kept = await harness.rows("SELECT session_id FROM transcript_stats");
    expect(kept.map((r) => r.session_id).sort()).toEqual(
      (await store.listSessions()).map((s) => s.sessionId).sort(),
    );
    expect(await store.totalUsage()).toEqual(usage);
    // A session that started a task still running is held too, however idle it looks.
    const t5 = await exchange("5", "old words of five");
    await store.createTask({
      parentSessionKey: dm("5"),
      parentSessionId: t5.sessionId,
      parentToolCallId: null,
      rootSessionId: t5.sessionId,
      chat: { platform: "telegram", chatId: "5" },
      requester: "telegram:5",
      prompt: "count the files",
      context: null,
      depth: 1,
      background: true,
    });
    expect(await store.pruneSession(dm("5"), now + DAY, false)).toMatchObject({ sessions: 0 });
    expect(await store.getSession(dm("5"))).not.toBeNull();
    // The kept session count (store_totals) follows the removal.
    expect((await store.countSessions()).total).toBe(sessionsBefore);
  });

  it("prunes finished loose rows in batches, never pending ones", async () => {
    await history();
    const dry = await store.pruneLoose(now - 30 * DAY, 100, true);
    expect(dry.inbox).toBe(5);
    let removed = 0;
    for (let i = 0; i < 20; i += 1) {
      const step = await store.pruneLoose(now - 30 * DAY, 2, false);
      expect(step.inbox).toBeLessThanOrEqual(2);
      removed += step.inbox;
      if (step.inbox + step.outbox + step.events + step.approvals === 0) break;
    }
    expect(removed).toBe(5);
    const states = (await harness.rows("SELECT state FROM inbox ORDER BY id")).map((r) => r.state);
    expect(states).toEqual(["running", "pending"]);
    const holds = await store.retentionHolds();
    const held = [dm("2"), dm("3"), dm("4")].map(
      async (k) => (await store.getSession(k))!.sessionId,
    );
    expect(holds.transcripts.sort()).toEqual((await Promise.all(held)).sort());
  });

  it("exports exactly one person's data, and forgets them while others stay intact", async () => {
    await exchange("5", "five alone");
    await exchange("6", "six alone");
    await exchange("5", "five in the group", GROUP, "-100");
    await exchange("6", "six in the group", GROUP, "-100");
    await store.requestPairing({
      platform: "telegram",
      userId: "5",
      userName: "name-5",
      chatId: "5",
      ttlMs: DAY,
      maxPending: 3,
    });
    const data = await store.personData({ platform: "telegram", userId: "5" });
    const text = JSON.stringify(data);
    expect(text).toContain("five alone");
    expect(text).toContain("five in the group");
    expect(text).not.toContain("six");
    expect(data.transcripts.map((t) => [t.sessionKey, t.own])).toEqual([
      [dm("5"), true],
      [GROUP, false],
    ]);
    expect(data.inbox.map((i) => i.text)).toEqual(["five alone", "five in the group"]);
    expect(data.pairing).toHaveLength(1);
    expect(data.usage).toEqual({ calls: 1, promptTokens: 100, completionTokens: 10 });

    const forgot = await store.forgetPerson({ platform: "telegram", userId: "5" });
    expect(forgot).toMatchObject({ ok: true, sessions: 1, redacted: 4, pairing: 1 });
    const all = JSON.stringify(await harness.rows("SELECT * FROM inbox")) + (await bodies()).join();
    expect(all).not.toContain("five");
    expect(all).not.toContain("name-5");
    expect(all).toContain("six alone");
    expect(all).toContain("six in the group");
    expect(all).toContain(FORGOTTEN_TEXT);
    expect(await store.getSession(dm("5"))).toBeNull();
    expect(await store.getSession(GROUP)).not.toBeNull();
    const after = await store.personData({ platform: "telegram", userId: "5" });
    expect(after.transcripts).toEqual([]);
    expect(after.inbox).toEqual([]);
  });

  it("refuses to forget a person with work in progress", async () => {
    await exchange("7", "hello");
    await say("7", "pending");
    expect(await store.forgetPerson({ platform: "telegram", userId: "7" })).toMatchObject({
      ok: false,
    });
    expect(await store.getSession(dm("7"))).not.toBeNull();
  });

  it("counts what a backup records", async () => {
    await exchange("1", "one");
    expect(await store.storeCounts()).toMatchObject({
      sessions: 1,
      transcripts: 1,
      messages: 4,
      inbox: 1,
      outbox: 1,
    });
    expect((await store.storeCounts()).schemaVersion).toBeGreaterThan(10);
  });
});
