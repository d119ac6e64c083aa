import { describe, expect, it } from "vitest";
import type { ChatMessage, ToolCall } from "../agent/types.js";
import {
  AUTO_CONTINUE_NOTE,
  cutOffRequest,
  endsWithUnansweredToolResults,
  hasOpenToolCalls,
  joinRequests,
  NOT_RUN_RESULT,
  normalizeHistory,
  resumeNote,
  unansweredRequests,
  withAutoContinueNote,
  withNoteBeforeTail,
} from "./history.js";

const call = (id: string): ToolCall => ({
  id,
  type: "function",
  function: { name: "terminal", arguments: "{}" },
});

describe("normalizeHistory", () => {
  it("leaves the trailing assistant's missing tool results for the loop to run", () => {
    const history: ChatMessage[] = [
      { role: "user", content: "go" },
      { role: "assistant", content: null, tool_calls: [call("a"), call("b")] },
      { role: "tool", tool_call_id: "a", content: "A" },
    ];
    expect(normalizeHistory(history)).toEqual(history);
  });

  it("fills results of calls cut off before a later message with a not-run placeholder", () => {
    const history: ChatMessage[] = [
      { role: "assistant", content: null, tool_calls: [call("a")] },
      { role: "user", content: "never mind" },
    ];
    expect(normalizeHistory(history)).toEqual([
      history[0],
      { role: "tool", tool_call_id: "a", content: NOT_RUN_RESULT },
      history[1],
    ]);
  });

  it("moves a late tool result back behind its call and drops orphans", () => {
    const history: ChatMessage[] = [
      { role: "assistant", content: null, tool_calls: [call("a")] },
      { role: "user", content: "next" },
      { role: "tool", tool_call_id: "a", content: "late" },
      { role: "tool", tool_call_id: "zzz", content: "orphan" },
    ];
    expect(normalizeHistory(history)).toEqual([history[0], history[2], history[1]]);
  });
});

describe("endsWithUnansweredToolResults", () => {
  it("is true only for histories ending in tool results", () => {
    expect(endsWithUnansweredToolResults([{ role: "tool", tool_call_id: "a", content: "x" }])).toBe(
      true,
    );
    expect(endsWithUnansweredToolResults([{ role: "assistant", content: "done" }])).toBe(false);
    expect(endsWithUnansweredToolResults([{ role: "user", content: "hi" }])).toBe(false);
    expect(endsWithUnansweredToolResults([])).toBe(false);
  });
});

describe("auto-continue note", () => {
  const toolCall = {
    role: "assistant",
    content: null,
    tool_calls: [call("t1"), call("t2")],
  } as const satisfies ChatMessage;
  const note: ChatMessage = { role: "system", content: AUTO_CONTINUE_NOTE };
  const next: ChatMessage = { role: "user", content: "what happened?\nline two" };

  it("is added when the history ends with a tool result", () => {
    const history: ChatMessage[] = [
      { role: "user", content: "run it" },
      toolCall,
      { role: "tool", tool_call_id: "t1", content: "ok" },
    ];
    expect(withAutoContinueNote([...history, next])).toEqual([...history, note, next]);
    expect(AUTO_CONTINUE_NOTE).toMatch(/^\[System note: .*tool result/);
  });

  it("is added once after several trailing tool results", () => {
    const history: ChatMessage[] = [
      toolCall,
      { role: "tool", tool_call_id: "t1", content: "a" },
      { role: "tool", tool_call_id: "t2", content: "b" },
    ];
    const input = withAutoContinueNote([...history, next]);
    expect(input.filter((m) => m.role === "system")).toHaveLength(1);
    expect(input).toEqual([...history, note, next]);
  });

  it("is not added when the history ends with an assistant message", () => {
    const history: ChatMessage[] = [
      { role: "user", content: "hi" },
      { role: "assistant", content: "hello" },
    ];
    expect(withAutoContinueNote([...history, next])).toEqual([...history, next]);
  });

  it("is not added when the history ends with a user message", () => {
    const history: ChatMessage[] = [{ role: "user", content: "hi" }];
    expect(withAutoContinueNote([...history, next])).toEqual([...history, next]);
  });

  it("is not added for an empty history", () => {
    expect(withAutoContinueNote([next])).toEqual([next]);
    expect(withAutoContinueNote([])).toEqual([]);
  });

  it("keeps the user's new message intact after the note", () => {
    const history: ChatMessage[] = [toolCall, { role: "tool", tool_call_id: "t1", content: "ok" }];
    const input = withAutoContinueNote([...history, next]);
    expect(input.at(-2)).toEqual(note);
    expect(input.at(-1)).toBe(next);
    expect(next.content).toBe("what happened?\nline two");
  });

  it("does nothing when the input does not end with a new user message", () => {
    const history: ChatMessage[] = [toolCall, { role: "tool", tool_call_id: "t1", content: "ok" }];
    expect(withAutoContinueNote(history)).toEqual(history);
  });
});

describe("resume note", () => {
  it("names the reason that cut the turn off and asks to tell the user the session is back", () => {
    expect(resumeNote("restart_timeout")).toContain("a gateway restart");
    expect(resumeNote("shutdown_timeout")).toContain("a gateway shutdown");
    expect(resumeNote("restart_interrupted")).toContain("an unexpected gateway stop");
    expect(resumeNote("restart_interrupted")).toContain("restored");
    expect(resumeNote(null)).toMatch(/^\[System note: /);
  });
});

describe("withNoteBeforeTail", () => {
  const note: ChatMessage = { role: "system", content: "note" };

  it("puts the note before a trailing user message that is the turn's new input", () => {
    const h: ChatMessage[] = [
      { role: "assistant", content: "a" },
      { role: "user", content: "u" },
    ];
    expect(withNoteBeforeTail(h, note, { keepUserLast: true })).toEqual([h[0], note, h[1]]);
    expect(withNoteBeforeTail(h, note, { keepUserLast: false })).toEqual([...h, note]);
  });

  it("puts the note before a trailing assistant whose tool calls still lack results", () => {
    const h: ChatMessage[] = [
      { role: "user", content: "u" },
      { role: "assistant", content: null, tool_calls: [call("a"), call("b")] },
      { role: "tool", tool_call_id: "a", content: "A" },
    ];
    expect(withNoteBeforeTail(h, note, { keepUserLast: false })).toEqual([h[0], note, h[1], h[2]]);
  });

  it("appends the note after answered tool results and after a final answer", () => {
    const answered: ChatMessage[] = [
      { role: "assistant", content: null, tool_calls: [call("a")] },
      { role: "tool", tool_call_id: "a", content: "A" },
    ];
    expect(withNoteBeforeTail(answered, note, { keepUserLast: true })).toEqual([...answered, note]);
    const done: ChatMessage[] = [{ role: "assistant", content: "done" }];
    expect(withNoteBeforeTail(done, note, { keepUserLast: true })).toEqual([...done, note]);
  });
});

describe("hasOpenToolCalls", () => {
  const call = (id: string) => ({
    id,
    type: "function" as const,
    function: { name: "terminal", arguments: "{}" },
  });
  it("is true only while the last assistant message has calls without results", () => {
    const asked: ChatMessage[] = [
      { role: "user", content: "go" },
      { role: "assistant", content: null, tool_calls: [call("a"), call("b")] },
      { role: "tool", tool_call_id: "a", content: "ok" },
    ];
    expect(hasOpenToolCalls(asked)).toBe(true);
    const answered = [...asked, { role: "tool", tool_call_id: "b", content: "ok" } as ChatMessage];
    expect(hasOpenToolCalls(answered)).toBe(false);
    expect(hasOpenToolCalls([...answered, { role: "assistant", content: "done" }])).toBe(false);
    expect(hasOpenToolCalls([])).toBe(false);
  });
});

describe("unansweredRequests", () => {
  it("lists every user message after the last reply with text, not only the last", () => {
    const history: ChatMessage[] = [
      { role: "user", content: "one" },
      { role: "assistant", content: "re one" },
      { role: "user", content: "two" },
      { role: "user", content: "three" },
      { role: "assistant", content: null, tool_calls: [call("c1")] },
      { role: "tool", tool_call_id: "c1", content: "ok" },
    ];
    expect(unansweredRequests(history)).toEqual(["two", "three"]);
    expect(unansweredRequests(history.slice(0, 2))).toEqual([]);
  });

  it("joins text by blank lines and keeps image parts", () => {
    expect(joinRequests(["two", "three"])).toBe("two\n\nthree");
    const image = { type: "image_url" as const, image_url: { url: "data:image/png;base64,AA" } };
    expect(joinRequests(["look", [image]])).toEqual([{ type: "text", text: "look" }, image]);
  });
});

describe("cutOffRequest", () => {
  it("is every unanswered message as one, else the last user message, else null", () => {
    const answered: ChatMessage[] = [
      { role: "user", content: "one" },
      { role: "assistant", content: "re one" },
    ];
    expect(
      cutOffRequest([
        ...answered,
        { role: "user", content: "two" },
        { role: "user", content: "three" },
      ]),
    ).toBe("two\n\nthree");
    expect(cutOffRequest(answered)).toBe("one");
    expect(cutOffRequest([])).toBeNull();
  });
});
