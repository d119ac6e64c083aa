/**
 * The agent loop's own logic against a scripted model and in-process tools (no HTTP, no shell):
 * journal order, iteration limit, failures, interrupts, steering, and resuming unanswered calls.
 * agent-loop.test.ts covers the same loop through the real client and the real tools.
 */
import { describe, expect, it } from "vitest";
import { type ScriptStep, scriptedModel, scriptedTool } from "../../test/fakes/scripted-model.js";
import { runAgentLoop } from "./agent-loop.js";
import { createToolRegistry } from "./tools/index.js";
import type { Tool, ToolOutput } from "./tools/tool.js";
import type { ChatMessage, RunTurnOptions, ToolCall, TurnEvent, TurnJournal } from "./types.js";

type Entry =
  | { kind: "messages"; messages: ChatMessage[] }
  | { kind: "start"; id: string }
  | { kind: "finish"; id: string; output: ToolOutput };

function setup(steps: ScriptStep[], tools: Tool[], overrides: Partial<RunTurnOptions> = {}) {
  const model = scriptedModel(steps);
  const entries: Entry[] = [];
  const events: TurnEvent[] = [];
  const journal: TurnJournal = {
    async recordMessages(messages) {
      entries.push({ kind: "messages", messages });
    },
    async recordToolStart(call) {
      entries.push({ kind: "start", id: call.id });
    },
    async recordToolFinish(call, output) {
      entries.push({ kind: "finish", id: call.id, output });
    },
  };
  const run = () =>
    runAgentLoop({
      llm: model,
      tools: createToolRegistry(tools),
      systemPrompt: "system",
      history: [{ role: "user", content: "hi" }],
      maxIterations: 5,
      cwd: "/nowhere",
      signal: new AbortController().signal,
      journal,
      onEvent: (event) => events.push(event),
      ...overrides,
    });
  return { model, entries, events, run };
}

const ok = (output: string): ToolOutput => ({ output, isError: false });

describe("the agent loop with a scripted model", () => {
  it("journals the tool-call message before the tool runs, then answers", async () => {
    const clock = scriptedTool("clock", () => ok("12:00"));
    const { model, entries, events, run } = setup(
      [
        { tools: [{ name: "clock", id: "c1" }] },
        { text: "It is noon.", deltas: ["It is ", "noon."] },
      ],
      [clock],
    );
    const result = await run();
    expect(result).toMatchObject({ stopReason: "stop", reply: "It is noon.", iterations: 2 });
    expect(result.finalMessage).toEqual({ role: "assistant", content: "It is noon." });
    expect(entries.map((e) => e.kind)).toEqual(["messages", "start", "finish"]);
    expect(entries[2]).toEqual({ kind: "finish", id: "c1", output: ok("12:00") });
    expect(events.map((e) => e.type)).toEqual([
      "tool_start",
      "tool_end",
      "text_delta",
      "text_delta",
    ]);
    // The second call sees the system prompt, the request, the tool call and its result.
    expect(model.requests[1]?.messages.map((m) => m.role)).toEqual([
      "system",
      "user",
      "assistant",
      "tool",
    ]);
    expect(model.requests[1]?.tools.map((t) => t.function.name)).toEqual(["clock"]);
  });

  it("stops at the iteration limit with a reply that says so", async () => {
    const loop: ScriptStep = { tools: [{ name: "noop" }] };
    const { model, run } = setup([loop, loop, loop], [scriptedTool("noop", () => ok(""))], {
      maxIterations: 2,
    });
    const result = await run();
    expect(result.stopReason).toBe("max_iterations");
    expect(result.reply).toContain("agent.max_iterations");
    expect(model.requests).toHaveLength(2);
  });

  it("turns a model failure into an error reply without throwing", async () => {
    const { run } = setup([{ fail: "http", status: 500, error: "boom" }], []);
    const result = await run();
    expect(result).toMatchObject({ stopReason: "error", errorMessage: "boom" });
    expect(result.reply).toContain("HTTP 500");
  });

  it("an interrupt during a model call ends the turn as aborted", async () => {
    const controller = new AbortController();
    const { run } = setup([{ hang: true }], [], { signal: controller.signal });
    const done = run();
    controller.abort();
    expect((await done).stopReason).toBe("aborted");
  });

  it("an interrupt during a tool records the remaining calls as not run", async () => {
    const controller = new AbortController();
    const stopper = scriptedTool("stopper", () => {
      controller.abort();
      return ok("stopped");
    });
    const never = scriptedTool("never", () => ok("ran"));
    const { entries, run } = setup(
      [
        {
          tools: [
            { name: "stopper", id: "a" },
            { name: "never", id: "b" },
          ],
        },
      ],
      [stopper, never],
      { signal: controller.signal },
    );
    expect((await run()).stopReason).toBe("aborted");
    expect(never.calls).toEqual([]);
    const finishes = entries.filter((e) => e.kind === "finish");
    expect(finishes.map((e) => e.id)).toEqual(["a", "b"]);
    expect(finishes[1]).toMatchObject({ output: { isError: true } });
  });

  it("records steered input before the next model call sees it", async () => {
    const steered = ["also check the date"];
    const { model, entries, run } = setup(
      [{ tools: [{ name: "clock" }] }, { text: "done" }],
      [scriptedTool("clock", () => ok("12:00"))],
      { takeSteeredInput: () => steered.splice(0) },
    );
    await run();
    expect(entries.at(-1)).toEqual({
      kind: "messages",
      messages: [{ role: "user", content: "also check the date" }],
    });
    expect(model.requests[1]?.messages.at(-1)).toEqual({
      role: "user",
      content: "also check the date",
    });
  });

  it("runs the unanswered calls of a resumed transcript before calling the model", async () => {
    const call: ToolCall = {
      id: "old",
      type: "function",
      function: { name: "clock", arguments: "{}" },
    };
    const clock = scriptedTool("clock", () => ok("12:00"), { readOnly: true });
    const { model, entries, run } = setup([{ text: "resumed" }], [clock], {
      history: [
        { role: "user", content: "time?" },
        { role: "assistant", content: null, tool_calls: [call] },
      ],
    });
    expect((await run()).reply).toBe("resumed");
    expect(entries.map((e) => e.kind)).toEqual(["start", "finish"]);
    expect(model.requests[0]?.messages.at(-1)).toEqual({
      role: "tool",
      tool_call_id: "old",
      content: "12:00",
    });
  });

  it("says so when the script runs out, instead of hanging", async () => {
    const { run } = setup([], []);
    const result = await run();
    expect(result.stopReason).toBe("error");
    expect(result.errorMessage).toContain("no step for call 1");
  });
});
