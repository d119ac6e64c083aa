/** The store contract for budgets, on every implementation (see store.test.ts). */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { storeHarnesses } from "../../test/helpers/store-harness.js";
import type { BudgetPauseInput, Store, UsageScope } from "./store.js";

const KEY = "agent:main:telegram:dm:42";
const ADDRESS = { platform: "telegram", chatId: "42" };
const SCOPE: UsageScope = {
  chat: "telegram:42",
  user: "telegram:42",
  task: null,
  schedule: "nightly",
};

describe.each(storeHarnesses())("the $name store: budgets", (harness) => {
  let store: Store;
  let clock = 10_000;
  let sessionId: string;
  let turnId: number;
  let pause: BudgetPauseInput;

  beforeEach(async () => {
    clock = 10_000;
    await harness.setup();
    store = await harness.open(() => clock);
    const { item } = await store.acceptInbound({
      platform: "telegram",
      chatId: "42",
      platformMessageId: "1",
      sessionKey: KEY,
      text: "hello",
      senderId: "42",
      address: ADDRESS,
    });
    const turn = await store.startTurn({
      sessionKey: KEY,
      inboxId: item.id,
      userMessage: { role: "user", content: "hello" },
      origin: ADDRESS,
    });
    sessionId = turn.sessionId;
    turnId = turn.id;
    pause = {
      id: "b-0123456789",
      sessionKey: KEY,
      sessionId,
      turnId,
      budgetId: "chat:day",
      scopeKey: "telegram:42",
      periodStart: 0,
      periodEnd: 86_400_000,
      summary: "Paused: the chat budget per day is used up",
      address: ADDRESS,
      requester: "telegram:42",
    };
  });
  afterEach(async () => {
    await store.close();
    await harness.teardown();
  });

  const call = (promptTokens: number, completionTokens: number, scope = SCOPE) => ({
    model: "m",
    promptTokens,
    completionTokens,
    estimated: false,
    scope,
  });

  it("sums usage per scope key from a time on, across the writes that record usage", async () => {
    await store.appendMessages(
      sessionId,
      turnId,
      [{ role: "assistant", content: "a" }],
      [],
      call(100, 10),
    );
    clock = 20_000;
    await store.appendMessages(
      sessionId,
      turnId,
      [{ role: "assistant", content: "b" }],
      [],
      call(50, 5, { chat: "telegram:7", user: "telegram:7", task: "t1", schedule: null }),
    );
    await store.finishTurn({
      turnId,
      state: "done",
      finalMessage: { role: "assistant", content: "done" },
      usage: call(1, 2),
      reply: null,
    });
    expect(await store.spend({ scope: null, key: null, since: 0 })).toEqual({
      calls: 3,
      promptTokens: 151,
      completionTokens: 17,
    });
    expect(await store.spend({ scope: "chat", key: "telegram:42", since: 0 })).toEqual({
      calls: 2,
      promptTokens: 101,
      completionTokens: 12,
    });
    // From a time on: the first call is before the period.
    expect(await store.spend({ scope: "chat", key: "telegram:42", since: 15_000 })).toMatchObject({
      calls: 1,
      promptTokens: 1,
    });
    expect(await store.spend({ scope: "task", key: "t1", since: 0 })).toMatchObject({ calls: 1 });
    expect(await store.spend({ scope: "schedule", key: "nightly", since: 0 })).toMatchObject({
      calls: 2,
    });
    expect(await store.spend({ scope: "user", key: "nobody", since: 0 })).toEqual({
      calls: 0,
      promptTokens: 0,
      completionTokens: 0,
    });
    const byChat = await store.spendByKey("chat", 0);
    expect(byChat.map((r) => [r.key, r.promptTokens + r.completionTokens])).toEqual([
      ["telegram:42", 113],
      ["telegram:7", 55],
    ]);
  });

  it("records a pause once and answers it once; raises are counted per budget, key and period", async () => {
    const first = await store.requestBudgetPause(pause);
    const again = await store.requestBudgetPause({ ...pause, summary: "changed" });
    expect(first).toMatchObject({ id: pause.id, state: "pending", applied: false, turnId });
    expect(again.summary).toBe(pause.summary);
    expect(await store.listBudgetPauses({ state: "pending", sessionKey: KEY })).toHaveLength(1);
    expect((await store.backlog()).budgetPausesPending).toBe(1);
    expect(await store.countBudgetRaises("chat:day", "telegram:42", 0)).toBe(0);

    const decided = await store.decideBudgetPause({
      id: pause.id,
      decision: "raise",
      decidedBy: "op",
    });
    expect(decided).toMatchObject({ changed: true, record: { state: "raised", decidedBy: "op" } });
    const second = await store.decideBudgetPause({
      id: pause.id,
      decision: "deny",
      decidedBy: "x",
    });
    expect(second).toMatchObject({ changed: false, record: { state: "raised" } });
    expect((await store.backlog()).budgetPausesPending).toBe(0);
    expect(
      await store.decideBudgetPause({ id: "b-none", decision: "deny", decidedBy: null }),
    ).toBeNull();

    expect(await store.countBudgetRaises("chat:day", "telegram:42", 0)).toBe(1);
    expect(await store.countBudgetRaises("chat:day", "telegram:42", 86_400_000)).toBe(0);
    expect(await store.countBudgetRaises("chat:day", "telegram:7", 0)).toBe(0);

    expect((await store.listBudgetPauses({ unapplied: true })).map((p) => p.id)).toEqual([
      pause.id,
    ]);
    await store.markBudgetPauseApplied(pause.id);
    expect(await store.listBudgetPauses({ unapplied: true })).toEqual([]);
    expect((await store.getBudgetPause(pause.id))?.applied).toBe(true);
  });

  it("a global pause has no key; pauses past their period's end are due", async () => {
    await store.requestBudgetPause({
      ...pause,
      id: "b-global",
      budgetId: "global:month",
      scopeKey: null,
    });
    expect(await store.listBudgetPauses({ dueBy: 86_399_999 })).toEqual([]);
    expect((await store.listBudgetPauses({ dueBy: 86_400_000 })).map((p) => p.id)).toEqual([
      "b-global",
    ]);
    await store.decideBudgetPause({ id: "b-global", decision: "raise", decidedBy: null });
    expect(await store.countBudgetRaises("global:month", null, 0)).toBe(1);
  });

  it("an answer for a transcript `/new` left behind is not listed as unapplied", async () => {
    await store.requestBudgetPause(pause);
    await store.decideBudgetPause({ id: pause.id, decision: "approve", decidedBy: "op" });
    await store.resetSession(KEY);
    expect(await store.listBudgetPauses({ unapplied: true })).toEqual([]);
  });
});
