/**
 * Budgets in a real gateway in this process, with the stand-in model's usage: a spent budget
 * holds the next model call and asks; an operator's answer (once, raise, deny) each does what it
 * says; a month budget starts afresh at the period's boundary (injected clock); a sender over
 * their rate waits in line instead of being dropped.
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { BudgetParts } from "../../src/gateway/budget-wiring.js";
import { openSqliteDatabase } from "../../src/sessions/sqlite-database.js";
import type { Store } from "../../src/sessions/store.js";
import { type FakeOpenAI, startFakeOpenAI } from "../fakes/openai-server.js";
import { type InProcessGateway, startInProcessGateway } from "../helpers/in-process-gateway.js";
import { createTempDir } from "../helpers/temp-home.js";
import { waitFor } from "../helpers/wait-for.js";

describe("budgets (in-process gateway, stand-in model)", () => {
  let home: ReturnType<typeof createTempDir>;
  let model: FakeOpenAI;
  let gw: InProcessGateway | undefined;

  beforeEach(async () => {
    home = createTempDir("keel-budgets-");
    model = await startFakeOpenAI();
  });
  afterEach(async () => {
    await gw?.shutdown();
    gw = undefined;
    await model.close();
    home.cleanup();
  });

  async function start(
    yaml: string,
    options: { now?: () => number; env?: Record<string, string> } = {},
  ) {
    writeFileSync(join(home.path, "config.yaml"), yaml);
    gw = await startInProcessGateway({
      home: home.path,
      modelBaseUrl: model.baseUrl,
      ...(options.now && { now: options.now }),
      ...(options.env && { env: options.env }),
    });
    return gw;
  }

  const texts = (chatId = "1") => gw!.platform.texts(chatId);
  const said = (prefix: string, chatId = "1") =>
    waitFor(() => texts(chatId).find((t) => t.startsWith(prefix)), {
      timeoutMs: 15_000,
      message: `a reply starting "${prefix}"; chat: ${JSON.stringify(texts(chatId))}`,
    });
  /** The id of the n-th card (a reply that carries a pause or approval id) in the chat. */
  const card = async (n = 1, chatId = "1") => {
    const cards = () =>
      gw!.platform.delivered.filter((d) => d.address.chatId === chatId && d.approvalId);
    await waitFor(() => cards().length >= n, {
      timeoutMs: 15_000,
      message: `card ${n}; chat: ${JSON.stringify(texts(chatId))}`,
    });
    return cards()[n - 1]!;
  };
  const answer = async (id: string, decision: string) => {
    const res = await fetch(`${gw!.url}/api/approvals/${id}`, {
      method: "POST",
      headers: { authorization: `Bearer ${gw!.controlToken}`, "content-type": "application/json" },
      body: JSON.stringify({ decision }),
    });
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  };
  const usage = async () => {
    const res = await fetch(`${gw!.url}/api/usage`, {
      headers: { authorization: `Bearer ${gw!.controlToken}` },
    });
    expect(res.status).toBe(200);
    return (await res.json()) as {
      budgets: {
        id: string;
        standings: { key: string | null; raises: number; used_up: boolean }[];
      }[];
      pauses: { id: string }[];
    };
  };

  /** One token a day per chat: the first call spends it, the next waits. */
  const CHAT_DAY = "budgets:\n  - { scope: chat, period: day, tokens: 1 }\n";

  it("a spent chat budget holds the next model call and asks, naming the budget; other chats go on", async () => {
    await start(CHAT_DAY);
    await gw!.send("echo: one");
    await said("one");
    await gw!.send("echo: two");
    const paused = await card();
    expect(paused.approvalId).toMatch(/^b-[0-9a-f]{10}$/);
    expect(paused.text).toContain("Paused: the chat budget per day (test:1) is used up");
    expect(paused.text).toMatch(/of 1 tokens spent, 0 left/);
    // The call that would have gone over never started.
    expect(model.requests).toHaveLength(1);
    expect((await usage()).pauses.map((p) => p.id)).toEqual([paused.approvalId]);

    // Another chat has its own budget.
    await gw!.send("echo: elsewhere", "2");
    await said("elsewhere", "2");

    // A new message while paused is kept and told so, without a new model call.
    await gw!.send("echo: three");
    await said("⏸ Still paused");
    expect(model.requests).toHaveLength(2);

    // /usage shows the budget of this chat.
    await gw!.send("/usage");
    const report = await said("Usage of this conversation");
    expect(report).toMatch(/Budget, chat budget per day \(test:1\): .* 0 left; resets/);
  });

  it("approve once: the waiting turn goes on (both kept messages answered); the next turn asks again", async () => {
    await start(CHAT_DAY);
    await gw!.send("echo: one");
    await said("one");
    await gw!.send("echo: two");
    const first = await card();
    const answered = await answer(first.approvalId!, "approve");
    expect(answered.status).toBe(200);
    await said("two");
    expect(model.requests.at(-1)!.messages.some((m) => m.content === "echo: two")).toBe(true);
    // A second answer changes nothing.
    expect((await answer(first.approvalId!, "deny")).status).toBe(409);
    await gw!.send("echo: four");
    const second = await card(2);
    expect(second.approvalId).not.toBe(first.approvalId);
    expect(texts()).not.toContain("four");
  });

  it("raise: the budget is raised for the period and the turn goes on", async () => {
    await start(CHAT_DAY);
    await gw!.send("echo: one");
    await said("one");
    await gw!.send("echo: two");
    const paused = await card();
    expect((await answer(paused.approvalId!, "raise")).status).toBe(200);
    await said("two");
    const standing = (await usage()).budgets[0]!.standings.find((s) => s.key === "test:1")!;
    expect(standing.raises).toBe(1);
  });

  it("deny ends the turn once with a clear message and no model call", async () => {
    await start(CHAT_DAY);
    await gw!.send("echo: one");
    await said("one");
    await gw!.send("echo: two");
    const paused = await card();
    expect((await answer(paused.approvalId!, "deny")).status).toBe(200);
    await said("🚫 Stopped: going over the budget was denied");
    expect((await answer(paused.approvalId!, "approve")).status).toBe(409);
    // Once: a later message's turn is checked afresh (and pauses again), the denial is not repeated.
    await gw!.send("echo: again");
    await card(2);
    expect(texts().filter((t) => t.startsWith("🚫 Stopped"))).toHaveLength(1);
    expect(model.requests).toHaveLength(1);
    expect(texts()).not.toContain("two");
  });

  it("a sender cannot answer their own pause; an operator in the chat can (/approve)", async () => {
    await start(CHAT_DAY);
    await gw!.send("echo: one", "1", false);
    await said("one");
    await gw!.send("echo: two", "1", false);
    const paused = await card();
    await gw!.send(`/approve ${paused.approvalId}`, "1", false);
    await said("Only an operator may answer a budget pause.");
    await gw!.send(`/approve ${paused.approvalId} raise`, "1", true);
    await said("⬆ Budget pause");
    await said("two");
  });

  it("a month budget starts afresh at the month's boundary (injected clock): the pause is checked again", async () => {
    let clock = Date.parse("2026-01-31T23:59:00Z");
    await start("budgets:\n  - { scope: global, period: month, tokens: 1 }\n", {
      now: () => clock,
      env: { TZ: "UTC" },
    });
    await gw!.send("echo: january");
    await said("january");
    await gw!.send("echo: still january");
    await card();
    expect(model.requests).toHaveLength(1);
    // One second before the boundary nothing changes; at it, the period's check lets the turn go.
    clock = Date.parse("2026-01-31T23:59:59Z");
    await gw!.send("echo: not yet");
    await said("⏸ Still paused");
    clock = Date.parse("2026-02-01T00:00:00Z");
    await said("🔄 Budget pause");
    // The turn that goes on answers what waited (the stand-in answers the latest message).
    await said("not yet");
    expect(model.requests.at(-1)!.messages.some((m) => m.content === "echo: still january")).toBe(
      true,
    );
    const standing = (await usage()).budgets[0]!.standings[0]!;
    expect(standing.used_up).toBe(true); // February's first call spent February's token.
  });
});

describe("a scheduled run paused by a budget (in-process gateway)", () => {
  let home: ReturnType<typeof createTempDir>;
  let model: FakeOpenAI;
  let gw: InProcessGateway | undefined;

  beforeEach(async () => {
    home = createTempDir("keel-budget-sched-");
    model = await startFakeOpenAI();
  });
  afterEach(async () => {
    await gw?.shutdown();
    gw = undefined;
    await model.close();
    home.cleanup();
  });

  it("is reported in its chat; its slots wait while paused and the misfire policy decides them after the answer", async () => {
    writeFileSync(
      join(home.path, "config.yaml"),
      "budgets:\n  - { scope: schedule, period: day, tokens: 1 }\n",
    );
    gw = await startInProcessGateway({ home: home.path, modelBaseUrl: model.baseUrl });
    const { gateway } = gw;
    const store = gateway.store;
    await gateway.schedules.create({
      name: "tick",
      every: "1s",
      prompt: "tock",
      chat: { platform: "test", chatId: "1" },
      misfire: "skip",
      createdBy: "cli",
    });
    const card = await waitFor(
      () => gw!.platform.delivered.find((d) => d.address.chatId === "1" && d.approvalId),
      { timeoutMs: 20_000, message: "the pause in the job's chat" },
    );
    expect(card.text).toMatch(/^⏰ tick\n⏸ Paused: the schedule budget per day \(tick\)/);
    const fires = async () => scheduleFires(home.path).length;
    expect(await fires()).toBe(2);
    // Slots come due while it waits: none fires (the cursor stays where the pause found it).
    const cursor = (await store.getScheduleJob("tick"))!.nextFireAt!;
    await waitFor(() => Date.now() > cursor + 2_500, { timeoutMs: 10_000 });
    expect((await store.getScheduleJob("tick"))!.nextFireAt).toBe(cursor);
    expect(await fires()).toBe(2);

    const answeredAt = Date.now();
    const before = gw.platform.texts("1").length;
    const res = await fetch(`${gw.url}/api/approvals/${card.approvalId}`, {
      method: "POST",
      headers: { authorization: `Bearer ${gw.controlToken}`, "content-type": "application/json" },
      body: JSON.stringify({ decision: "approve" }),
    });
    expect(res.status).toBe(200);
    // The paused run answers, then misfire "skip": the missed slots are not run; the next fire
    // is a slot after the answer.
    await waitFor(async () => (await fires()) >= 3, { timeoutMs: 20_000, message: "next fire" });
    const third = scheduleFires(home.path)[2]!;
    expect(Date.parse(third.platformMessageId)).toBeGreaterThanOrEqual(answeredAt - 1000);
    // The paused run itself was answered (after the operator's answer was announced).
    await waitFor(
      () =>
        gw!.platform
          .texts("1")
          .slice(before)
          .some((t) => t.startsWith("ok: ")),
      { timeoutMs: 20_000, message: "the paused run's reply" },
    );
  });
});

/** The scheduled fires in the inbox (open and closed), oldest first, read from state.db. */
function scheduleFires(home: string): { platformMessageId: string }[] {
  const db = openSqliteDatabase(join(home, "state.db"), { readonly: true });
  try {
    return (
      db
        .prepare("SELECT platform_message_id FROM inbox WHERE platform = 'schedule' ORDER BY id")
        .all() as { platform_message_id: string }[]
    ).map((r) => ({ platformMessageId: r.platform_message_id }));
  } finally {
    db.close();
  }
}

describe("per-sender limits (in-process gateway)", () => {
  let home: ReturnType<typeof createTempDir>;
  let model: FakeOpenAI;
  let gw: InProcessGateway | undefined;

  beforeEach(async () => {
    home = createTempDir("keel-limits-");
    model = await startFakeOpenAI();
    // Messages arriving together are one turn: the reply names every message it answers.
    model.script((request) => {
      const start = request.messages.findLastIndex((m) => m.role === "assistant") + 1;
      const asked = request.messages
        .slice(start)
        .filter((m) => m.role === "user")
        .map((m) => String(m.content).replace(/^echo: /, ""));
      return { text: `answered: ${asked.join(",")}` };
    });
  });
  afterEach(async () => {
    await gw?.shutdown();
    gw = undefined;
    await model.close();
    home.cleanup();
  });

  /** Every message the replies say they answered, in the order of the replies. */
  const answered = () =>
    gw!.platform
      .texts("1")
      .filter((t) => t.startsWith("answered: "))
      .flatMap((t) => t.slice("answered: ".length).split(","));

  it("3 per window under a burst of 10: 7 wait in line, the sender is told once, all 10 are answered in order", async () => {
    writeFileSync(join(home.path, "config.yaml"), "limits:\n  per_user: { messages: 3, per: 2 }\n");
    gw = await startInProcessGateway({ home: home.path, modelBaseUrl: model.baseUrl });
    const core = (gw.gateway as unknown as { deps: { core: { budgetParts: BudgetParts } } }).deps
      .core;
    const limits = core.budgetParts.senderLimits!;
    for (let i = 1; i <= 10; i++) await gw.send(`echo: m${i}`, "1", false);
    // Held before any of them could start: the line is decided as they arrive.
    expect(limits.waiting()).toBe(7);
    await waitFor(() => answered().length === 10, {
      timeoutMs: 40_000,
      message: "10 answers",
    });
    expect(answered()).toEqual(Array.from({ length: 10 }, (_, i) => `m${i + 1}`));
    expect(gw.platform.texts("1").filter((t) => t.startsWith("⏳"))).toHaveLength(1);
    expect(limits.waiting()).toBe(0);
  }, 60_000);

  it("operators are exempt unless configured", async () => {
    writeFileSync(
      join(home.path, "config.yaml"),
      "limits:\n  per_user: { messages: 1, per: 600 }\n",
    );
    gw = await startInProcessGateway({ home: home.path, modelBaseUrl: model.baseUrl });
    for (let i = 1; i <= 3; i++) await gw.send(`echo: op${i}`, "1", true);
    await waitFor(() => answered().length === 3, { timeoutMs: 20_000, message: "3 answers" });
    expect(gw.platform.texts("1").filter((t) => t.startsWith("⏳"))).toHaveLength(0);
  });

  it("limits.exempt_operators: false holds operators too", async () => {
    writeFileSync(
      join(home.path, "config.yaml"),
      "limits:\n  per_user: { messages: 1, per: 600 }\n  exempt_operators: false\n",
    );
    gw = await startInProcessGateway({ home: home.path, modelBaseUrl: model.baseUrl });
    for (let i = 1; i <= 2; i++) await gw.send(`echo: op${i}`, "1", true);
    await waitFor(() => gw!.platform.texts("1").some((t) => t.startsWith("⏳")), {
      timeoutMs: 20_000,
      message: "queued notice",
    });
    await waitFor(() => answered().length === 1, { timeoutMs: 20_000, message: "1 answer" });
    expect(answered()).toEqual(["op1"]);
    // The second waits in the inbox (pending), not dropped.
    const store = (gw.gateway as unknown as { store: Store }).store;
    expect((await store.listOpenInbox()).map((i) => i.text)).toEqual(["echo: op2"]);
  });
});
