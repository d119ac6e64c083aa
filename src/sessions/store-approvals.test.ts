/** The store contract for approvals, on every implementation (see store.test.ts). */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  APPROVAL_ADDRESS as ADDRESS,
  APPROVAL_KEY as KEY,
  turnAskingApproval,
} from "../../test/helpers/approval-request.js";
import { storeHarnesses } from "../../test/helpers/store-harness.js";
import type { ApprovalRequestInput, Store } from "./store.js";

describe.each(storeHarnesses())("the $name store: approvals", (harness) => {
  let store: Store;
  let request: ApprovalRequestInput;

  beforeEach(async () => {
    await harness.setup();
    store = await harness.open(() => 5_000);
    request = await turnAskingApproval(store, 600_000);
  });
  afterEach(async () => {
    await store.close();
    await harness.teardown();
  });

  const journalState = async () =>
    (await harness.rows("SELECT state FROM tool_calls ORDER BY id")).map((r) => r.state);

  it("journals the call awaiting_approval together with the approval, once", async () => {
    const first = await store.requestApproval(request);
    const again = await store.requestApproval({ ...request, summary: "changed" });
    expect(first).toMatchObject({ id: request.id, state: "pending", requester: "telegram:42" });
    expect(again.summary).toBe("rm -rf build");
    expect(await journalState()).toEqual(["awaiting_approval"]);
    expect(await store.findApprovalForCall(request.sessionId, "call-1")).toMatchObject({
      id: request.id,
    });
    // Waiting is not running: recovery must not treat it as a call cut off mid-run.
    expect((await store.loadTurnHistory(request.sessionId)).unfinished).toEqual([]);
  });

  it("is answered exactly once; the journal row follows the decision", async () => {
    await store.requestApproval(request);
    const [a, b] = await Promise.all([
      store.decideApproval({ id: request.id, decision: "approve", decidedBy: "Ada" }),
      store.decideApproval({ id: request.id, decision: "deny", decidedBy: "Bob" }),
    ]);
    expect(a).toMatchObject({ changed: true, record: { state: "approved", decidedBy: "Ada" } });
    expect(b).toMatchObject({ changed: false, record: { state: "approved", decidedBy: "Ada" } });
    expect(await journalState()).toEqual(["approved"]);
    expect(
      await store.decideApproval({ id: "nope", decision: "deny", decidedBy: null }),
    ).toBeNull();
  });

  it("approve_session grants its units to the asker in this transcript only", async () => {
    await store.requestApproval({ ...request, grants: ["terminal:cmd:a", "terminal:cmd:b"] });
    const decided = await store.decideApproval({
      id: request.id,
      decision: "approve_session",
      decidedBy: "Ada",
    });
    expect(decided?.record).toMatchObject({
      asker: "telegram:42",
      grants: ["terminal:cmd:a", "terminal:cmd:b"],
    });
    const { sessionId } = request;
    expect(await store.hasApprovalGrants(sessionId, "telegram:42", ["terminal:cmd:a"])).toBe(true);
    expect(
      await store.hasApprovalGrants(sessionId, "telegram:42", ["terminal:cmd:b", "terminal:cmd:a"]),
    ).toBe(true);
    // Every unit must be held; another person, credential or transcript holds none.
    expect(
      await store.hasApprovalGrants(sessionId, "telegram:42", ["terminal:cmd:a", "terminal:cmd:c"]),
    ).toBe(false);
    expect(await store.hasApprovalGrants(sessionId, "telegram:43", ["terminal:cmd:a"])).toBe(false);
    expect(await store.hasApprovalGrants(sessionId, "api:api_key", ["terminal:cmd:a"])).toBe(false);
    expect(await store.hasApprovalGrants("other-session", "telegram:42", ["terminal:cmd:a"])).toBe(
      false,
    );
    expect(await store.hasApprovalGrants(sessionId, "telegram:42", [])).toBe(false);
  });

  it("grants nothing when the asker is unknown", async () => {
    await store.requestApproval({ ...request, asker: null });
    await store.decideApproval({ id: request.id, decision: "approve_session", decidedBy: "Ada" });
    const rows = await harness.rows("SELECT * FROM approval_grants");
    expect(rows).toEqual([]);
  });

  it("lists a decision as unapplied until a later turn journals the call", async () => {
    await store.requestApproval(request);
    expect(await store.listUnappliedDecisions()).toEqual([]);
    await store.decideApproval({ id: request.id, decision: "deny", decidedBy: "Ada" });
    expect((await store.listUnappliedDecisions()).map((r) => r.id)).toEqual([request.id]);
    await store.finishTurn({
      turnId: request.turnId,
      state: "done",
      finalMessage: null,
      reply: null,
    });
    const next = await store.startTurn({ sessionKey: KEY, inboxId: null, userMessage: null });
    await store.recordToolStart({
      toolCallId: "call-1",
      turnId: next.id,
      sessionId: request.sessionId,
      name: "terminal",
      arguments: "{}",
    });
    expect(await store.listUnappliedDecisions()).toEqual([]);
  });

  it("forgets unapplied decisions of a transcript /new has left", async () => {
    await store.requestApproval(request);
    await store.decideApproval({ id: request.id, decision: "approve", decidedBy: "Ada" });
    await store.resetSession(KEY);
    expect(await store.listUnappliedDecisions()).toEqual([]);
  });

  /** 501 pending approvals in another chat: more than an unfiltered list shows. */
  async function askElsewhere(deadlineAt: number): Promise<void> {
    const otherKey = "agent:main:telegram:dm:43";
    const other = await store.ensureSession(otherKey, { platform: "telegram", chatId: "43" });
    for (let i = 0; i < 501; i += 1) {
      await store.requestApproval({
        ...request,
        id: `other${String(i).padStart(5, "0")}`,
        sessionKey: otherKey,
        sessionId: other.sessionId,
        toolCallId: `other-call-${i}`,
        deadlineAt,
      });
    }
  }

  it("lists one transcript's approvals, all of them, when asked", async () => {
    await askElsewhere(request.deadlineAt);
    await store.requestApproval(request);
    await store.requestApproval({ ...request, id: "decided001", toolCallId: "call-2" });
    await store.decideApproval({ id: "decided001", decision: "deny", decidedBy: "telegram:42" });

    const mine = await store.listApprovals({ sessionId: request.sessionId });
    expect(mine.map((a) => [a.id, a.state])).toEqual([
      ["decided001", "denied"],
      [request.id, "pending"],
    ]);
    const pending = await store.listApprovals({ state: "pending", sessionId: request.sessionId });
    expect(pending.map((a) => a.id)).toEqual([request.id]);
    expect(await store.listApprovals({ state: "pending" })).toHaveLength(500);
  });

  it("lists every due approval, the oldest first, however many wait elsewhere", async () => {
    // Asked first, so the oldest: past an unfiltered list's 500 newest.
    await store.requestApproval(request);
    await askElsewhere(900_000);
    expect((await store.listApprovals({ state: "pending" })).map((a) => a.id)).not.toContain(
      request.id,
    );
    expect((await store.listApprovals({ dueBy: 700_000 })).map((a) => a.id)).toEqual([request.id]);
    expect(await store.listApprovals({ dueBy: 900_000 })).toHaveLength(502);
    const here = await store.listApprovals({ state: "pending", sessionKey: KEY });
    expect(here.map((a) => a.id)).toEqual([request.id]);
  });

  it("keeps the approval id on outbox rows (cards with buttons)", async () => {
    const row = await store.enqueueOutbox({
      sessionKey: KEY,
      sessionId: request.sessionId,
      address: ADDRESS,
      text: "May I?",
      kind: "notice",
      approvalId: request.id,
    });
    expect(row.approvalId).toBe(request.id);
    expect((await store.listPendingOutbox())[0]!.approvalId).toBe(request.id);
  });
});
