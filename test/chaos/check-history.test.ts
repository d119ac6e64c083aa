import { describe, expect, it } from "vitest";
import { INTERRUPTED_MARK } from "../../src/platforms/stream-editor.js";
import { checkHistory, type History } from "./check-history.js";

const key = (chatId: number) => `agent:main:telegram:dm:${chatId}`;

function history(overrides: Partial<History>): History {
  return {
    sent: [],
    botMessages: [],
    ledger: [],
    cutOff: [],
    turns: [],
    sessionKeyOf: key,
    ...overrides,
  };
}

describe("checkHistory", () => {
  it("counts a message as answered only by a model reply listing its id in its own chat", () => {
    const verdict = checkHistory(
      history({
        sent: [
          { id: "c1.1", chatId: 1, sentAt: 1, stepStartedAt: 1 },
          { id: "c1.2", chatId: 1, sentAt: 2, stepStartedAt: 2 },
          { id: "c2.1", chatId: 2, sentAt: 3, stepStartedAt: 3 },
        ],
        botMessages: [
          { chatId: 1, text: "re c1.1 r1" },
          { chatId: 1, text: "⏳ Queued — c1.2" },
          { chatId: 1, text: "re c2.1 r2" },
        ],
      }),
    );
    expect(verdict.lost).toEqual(["c1.2", "c2.1"]);
  });

  it("judges what a chat finally shows: a streamed reply marked interrupted answers nothing", () => {
    const verdict = checkHistory(
      history({
        sent: [
          { id: "c1.1", chatId: 1, sentAt: 1, stepStartedAt: 1 },
          { id: "c1.2", chatId: 1, sentAt: 2, stepStartedAt: 2 },
        ],
        botMessages: [
          { chatId: 1, text: `re c1.1 c1.2 r1${INTERRUPTED_MARK}` },
          { chatId: 1, text: "re c1.2 r2" },
        ],
      }),
    );
    expect(verdict.lost).toEqual(["c1.1"]);
  });

  it("counts every repeated ledger id and every reply delivered again", () => {
    const verdict = checkHistory(
      history({
        ledger: ["call_1", "call_2", "call_1", "call_1"],
        botMessages: [
          { chatId: 1, text: "re c1.1 r1" },
          { chatId: 1, text: "re c1.1 r1" },
          { chatId: 2, text: "re c1.1 r1" },
          { chatId: 1, text: "⏳ Queued" },
          { chatId: 1, text: "⏳ Queued" },
        ],
      }),
    );
    expect(verdict.duplicateToolRuns).toEqual(["call_1", "call_1"]);
    expect(verdict.duplicateReplies).toEqual(["1/re c1.1 r1"]);
  });

  it("counts a second answer to an answered message, and an answer to nothing, as a reply shown twice", () => {
    const verdict = checkHistory(
      history({
        botMessages: [
          { chatId: 1, text: "re c1.1 r1" },
          // The same reply re-sent (send-to-mark window): a duplicate reply, not shown twice.
          { chatId: 1, text: "re c1.1 r1" },
          // Another turn answered c1.1 again.
          { chatId: 1, text: "re c1.1 c1.2 r3" },
          // A finished turn run again: the model had nothing open.
          { chatId: 1, text: "re  r4" },
          // A cut-off preview answers nothing; its message's real answer follows.
          { chatId: 2, text: `re c2.1 r5${INTERRUPTED_MARK}` },
          { chatId: 2, text: "re c2.1 r6" },
          { chatId: 2, text: "re c1.1 r7" },
        ],
      }),
    );
    expect(verdict.duplicateReplies).toEqual(["1/re c1.1 r1"]);
    expect(verdict.repliesShownTwice).toEqual(["1/re c1.1 c1.2 r3", "1/re  r4"]);
  });

  it("counts a cut-off turn as resumed only by a later done turn started before the chat's next step", () => {
    const sent = [
      { id: "c1.1", chatId: 1, sentAt: 100, stepStartedAt: 100 },
      // The rest of a burst begun before the kill is not a new step.
      { id: "c1.2", chatId: 1, sentAt: 210, stepStartedAt: 100 },
      { id: "c1.3", chatId: 1, sentAt: 400, stepStartedAt: 400 },
      { id: "c2.1", chatId: 2, sentAt: 100, stepStartedAt: 100 },
      { id: "c2.2", chatId: 2, sentAt: 400, stepStartedAt: 400 },
    ];
    const cutOff = [
      { turnId: 1, sessionKey: key(1), killedAt: 200 },
      { turnId: 2, sessionKey: key(2), killedAt: 200 },
      { turnId: 2, sessionKey: key(2), killedAt: 200 },
    ];
    const turns = [
      { id: 1, sessionKey: key(1), state: "interrupted", startedAt: 150 },
      { id: 2, sessionKey: key(2), state: "interrupted", startedAt: 150 },
      { id: 3, sessionKey: key(1), state: "done", startedAt: 300 },
      { id: 4, sessionKey: key(2), state: "interrupted", startedAt: 300 },
      { id: 5, sessionKey: key(2), state: "done", startedAt: 450 },
    ];
    const verdict = checkHistory(history({ sent, cutOff, turns }));
    expect(verdict.unresumed).toEqual([{ turnId: 2, sessionKey: key(2), killedAt: 200 }]);
  });
});
