import { describe, expect, it } from "vitest";
import type { ChatMessage, ToolCall } from "../agent/types.js";
import { endsWithUnansweredToolResults, NOT_RUN_RESULT, normalizeHistory } from "./history.js";

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
