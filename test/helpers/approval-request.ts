/**
 * A turn in chat 42 that is about to ask for approval of `rm -rf build`: the store's approval
 * tests and the CLI's start from it.
 */
import type { ApprovalRequestInput, Store } from "../../src/sessions/store.js";

export const APPROVAL_KEY = "agent:main:telegram:dm:42";
export const APPROVAL_ADDRESS = { platform: "telegram", chatId: "42" };

/** Stores the message and starts its turn; returns the request the turn's tool call would make. */
export async function turnAskingApproval(
  store: Store,
  deadlineAt: number,
): Promise<ApprovalRequestInput> {
  const { item } = await store.acceptInbound({
    platform: "telegram",
    chatId: "42",
    platformMessageId: "1",
    sessionKey: APPROVAL_KEY,
    text: "clean up",
    senderId: "42",
    address: APPROVAL_ADDRESS,
  });
  const turn = await store.startTurn({
    sessionKey: APPROVAL_KEY,
    inboxId: item.id,
    userMessage: { role: "user", content: "clean up" },
    origin: APPROVAL_ADDRESS,
  });
  return {
    id: "ab12cd34ef",
    sessionKey: APPROVAL_KEY,
    sessionId: turn.sessionId,
    turnId: turn.id,
    toolCallId: "call-1",
    toolName: "terminal",
    arguments: '{"command":"rm -rf build"}',
    summary: "rm -rf build",
    rule: "terminal:recursive_delete",
    reason: "deletes recursively",
    address: APPROVAL_ADDRESS,
    requester: "telegram:42",
    asker: "telegram:42",
    grants: ["terminal:cmd:rm -rf build"],
    deadlineAt,
  };
}
