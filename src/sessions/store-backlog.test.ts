/** The store's backlog (the `/metrics` queue gauges) and its commit observer, on every implementation. */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { storeHarnesses } from "../../test/helpers/store-harness.js";
import type { Store } from "./store.js";

const ADDRESS = { platform: "telegram", chatId: "42" };
const key = (n: number) => `agent:main:telegram:dm:${n}`;

describe.each(storeHarnesses())("the $name store: backlog", (harness) => {
  let store: Store;
  let clock = 10_000;
  const commits: number[] = [];

  beforeEach(async () => {
    await harness.setup();
    clock = 10_000;
    commits.length = 0;
    store = await harness.open(() => clock, { onCommit: (seconds) => commits.push(seconds) });
  });
  afterEach(async () => {
    await store.close();
    await harness.teardown();
  });

  const accept = (n: number) =>
    store.acceptInbound({
      platform: "telegram",
      chatId: String(n),
      platformMessageId: "1",
      sessionKey: key(n),
      text: "hello",
      senderId: String(n),
      address: { platform: "telegram", chatId: String(n) },
    });

  it("is empty on a new store", async () => {
    expect(await store.backlog()).toEqual({
      inboxPending: 0,
      outboxPending: 0,
      outboxOldestAt: null,
      approvalsPending: 0,
      budgetPausesPending: 0,
    });
  });

  it("counts pending inbox items, pending replies with the oldest's time, and pending approvals", async () => {
    await accept(1);
    const { item } = await accept(2);
    const turn = await store.startTurn({
      sessionKey: key(2),
      inboxId: item.id,
      userMessage: { role: "user", content: "hello" },
      origin: ADDRESS,
    });
    const queue = (text: string) =>
      store.enqueueOutbox({
        sessionKey: key(2),
        sessionId: turn.sessionId,
        address: ADDRESS,
        text,
        kind: "notice",
      });
    await queue("first");
    clock = 12_000;
    await queue("second");
    // Sent directly by its caller: not the dispatcher's backlog.
    await store.enqueueOutbox({
      sessionKey: key(2),
      sessionId: turn.sessionId,
      address: ADDRESS,
      text: "direct",
      kind: "notice",
      direct: true,
    });
    await store.requestApproval({
      id: "ab12cd34ef",
      sessionKey: key(2),
      sessionId: turn.sessionId,
      turnId: turn.id,
      toolCallId: "call-1",
      toolName: "terminal",
      arguments: '{"command":"rm -rf build"}',
      summary: "rm -rf build",
      rule: "terminal:recursive_delete",
      reason: "deletes recursively",
      address: ADDRESS,
      requester: "telegram:2",
      asker: "telegram:2",
      grants: [],
      deadlineAt: 600_000,
    });
    expect(await store.backlog()).toEqual({
      inboxPending: 1,
      outboxPending: 2,
      outboxOldestAt: 10_000,
      approvalsPending: 1,
      budgetPausesPending: 0,
    });
  });

  it("tells the commit observer how long each write took", async () => {
    await accept(1);
    await accept(2);
    expect(commits.length).toBeGreaterThan(0);
    for (const seconds of commits) expect(seconds).toBeGreaterThanOrEqual(0);
  });
});
