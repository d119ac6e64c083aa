import { describe, expect, it } from "vitest";
import type { ApprovalRecord } from "../sessions/store.js";
import { decidedText, questionText } from "./texts.js";
import { makeVisible } from "./visible-text.js";

function record(platform: string, summary = "rm -rf build"): ApprovalRecord {
  return {
    id: "k3x9",
    sessionKey: `agent:main:${platform}:dm:1`,
    sessionId: "s1",
    turnId: 1,
    toolCallId: "c1",
    toolName: "run",
    summary,
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
    for (const platform of ["telegram", "webchat", "whatsapp"]) {
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

const PADDED = `rm -rf ./build${" ".repeat(640)}; rm -rf /srv/data`;

describe("the command on the card", () => {
  it("shows both halves of a command padded with spaces, the padding as a count", () => {
    for (const platform of ["telegram", "discord", "slack", "webchat"]) {
      const text = questionText(record(platform, PADDED), 600_000);
      expect(text).toContain("rm -rf ./build⟨640 spaces⟩; rm -rf /srv/data");
    }
  });

  it("makes newlines, tabs, control, zero-width and bidi characters visible", () => {
    expect(makeVisible("echo hi\nrm -rf X")).toBe("echo hi⏎\nrm -rf X");
    expect(makeVisible("a\tb\rc\u001b[2Kd\u007f")).toBe("a␉b␍c␛[2Kd␡");
    expect(makeVisible("rm\u200b -rf \u202eX\u2066")).toBe("rm⟨U+200B⟩ -rf ⟨U+202E⟩X⟨U+2066⟩");
    expect(makeVisible("a\u00a0b\ufeffc\u2028d\u0085e")).toBe(
      "a⟨U+00A0⟩b⟨U+FEFF⟩c⟨U+2028⟩d⟨U+0085⟩e",
    );
    expect(makeVisible("a        b")).toBe("a        b");
    expect(makeVisible("é 🙂 ok")).toBe("é 🙂 ok");
  });

  it("shows a command longer than a chat message as head and tail, and where to read it whole", () => {
    const long = `echo start ${"x".repeat(9000)} ; rm -rf /srv/data`;
    for (const [platform, limit] of [
      ["telegram", 4096],
      ["discord", 2000],
      ["slack", 4000],
      ["whatsapp", 1024],
    ] as const) {
      const text = questionText(record(platform, long), 600_000);
      expect(text.length).toBeLessThanOrEqual(limit);
      expect(text).toContain("echo start xxx");
      expect(text).toContain("xxx ; rm -rf /srv/data\n```");
      expect(text).toContain("characters not shown here: an operator sees the whole command");
      expect(
        decidedText({ ...record(platform, long), decision: "approve" }).length,
      ).toBeLessThanOrEqual(limit);
    }
    // The web chat shows it all.
    expect(questionText(record("webchat", long), 600_000)).toContain(long);
  });

  it("tells chat users nothing of the operators' tools (no API route, no CLI command)", () => {
    const long = `echo start ${"x".repeat(9000)}`;
    for (const platform of ["telegram", "discord", "slack", "webchat", "api"]) {
      for (const command of ["rm -rf /srv/data", long]) {
        const card = questionText(record(platform, command), 600_000);
        const decided = decidedText({ ...record(platform, command), decision: "approve" });
        for (const text of [card, decided]) {
          expect(text).not.toMatch(/\/api\/|keel approvals|control token/);
        }
      }
    }
  });
});
