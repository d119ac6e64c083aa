import { describe, expect, it } from "vitest";
import type { ApprovalRecord } from "../sessions/store.js";
import { questionText } from "./texts.js";

function record(platform: string): ApprovalRecord {
  return {
    id: "k3x9",
    sessionKey: `agent:main:${platform}:dm:1`,
    sessionId: "s1",
    turnId: 1,
    toolCallId: "c1",
    toolName: "run",
    summary: "rm -rf build",
    rule: "recursive_delete",
    reason: "recursive delete",
    address: { platform, chatId: "1" },
    requester: null,
    asker: null,
    grants: [],
    state: "pending",
    decision: null,
    decidedBy: null,
    createdAt: 0,
    deadlineAt: 600_000,
    decidedAt: null,
  };
}

describe("questionText", () => {
  it("offers the buttons where the chat shows them, with the command as the other way", () => {
    for (const platform of ["telegram", "webchat"]) {
      const text = questionText(record(platform), 600_000);
      expect(text).toContain("Answer with the buttons, or /approve k3x9");
      expect(text).toContain("/deny k3x9");
    }
  });

  it("on Slack names the ! commands (a message starting with / is Slack's) and no buttons", () => {
    const text = questionText(record("slack"), 600_000);
    expect(text).toContain("Answer with !approve k3x9");
    expect(text).toContain("!deny k3x9");
    expect(text).not.toContain("/approve");
    expect(text).not.toContain("buttons");
  });

  it("on Discord, which shows no approval buttons, names the commands only", () => {
    const text = questionText(record("discord"), 600_000);
    expect(text).toContain("Answer with /approve k3x9");
    expect(text).not.toContain("buttons");
  });
});
