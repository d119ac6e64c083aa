import { access, mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { type FakeOpenAI, lastUserText, startFakeOpenAI } from "../../test/fakes/openai-server.js";
import { waitFor } from "../../test/helpers/wait-for.js";
import { buildPrompt, runAgentLoop } from "./agent-loop.js";
import { createLlmClient } from "./llm-client.js";
import { createToolRegistry } from "./tools/index.js";
import { createProcessRegistry, type ProcessRegistry } from "./tools/process-registry.js";
import { createReadFileTool } from "./tools/read-file.js";
import { createTerminalTool } from "./tools/terminal.js";
import type { ToolOutput } from "./tools/tool.js";
import { createWriteFileTool } from "./tools/write-file.js";
import type { ChatMessage, RunTurnOptions, ToolCall, TurnEvent, TurnJournal } from "./types.js";

type JournalEntry =
  | { kind: "messages"; messages: ChatMessage[] }
  | { kind: "start"; call: ToolCall }
  | { kind: "finish"; call: ToolCall; output: ToolOutput };

/** A journal that keeps what it was told, in order; `beforeStart` lets a test look at the world at that moment. */
function createTestJournal(beforeStart?: (call: ToolCall) => Promise<void>) {
  const entries: JournalEntry[] = [];
  const journal: TurnJournal = {
    async recordMessages(messages) {
      entries.push({ kind: "messages", messages });
    },
    async recordToolStart(call) {
      await beforeStart?.(call);
      entries.push({ kind: "start", call });
    },
    async recordToolFinish(call, output) {
      entries.push({ kind: "finish", call, output });
    },
  };
  return { entries, journal };
}

let fake: FakeOpenAI;
let cwd: string;
let processes: ProcessRegistry;

beforeEach(async () => {
  fake = await startFakeOpenAI();
  cwd = await mkdtemp(join(tmpdir(), "keel-loop-"));
  processes = createProcessRegistry();
});

afterEach(async () => {
  processes.killAll();
  await fake.close();
  await rm(cwd, { recursive: true, force: true });
});

function turn(history: ChatMessage[], overrides: Partial<RunTurnOptions> = {}) {
  const events: TurnEvent[] = [];
  const { entries, journal } = createTestJournal();
  const options: RunTurnOptions = {
    llm: createLlmClient({ baseUrl: fake.baseUrl, model: "m", timeoutMs: 10_000 }),
    tools: createToolRegistry([
      createTerminalTool({
        defaultTimeoutMs: 20_000,
        processes,
        env: { PATH: process.env.PATH ?? "" },
      }),
      createReadFileTool(),
      createWriteFileTool(),
    ]),
    systemPrompt: "You are Keel.",
    history,
    maxIterations: 10,
    cwd,
    signal: new AbortController().signal,
    journal,
    onEvent: (event) => events.push(event),
    ...overrides,
  };
  return { events, entries, run: () => runAgentLoop(options) };
}

const user = (content: string): ChatMessage => ({ role: "user", content });

function terminalCall(id: string, command: string): ToolCall {
  return {
    id,
    type: "function",
    function: { name: "terminal", arguments: JSON.stringify({ command }) },
  };
}

describe("runAgentLoop", () => {
  it("returns a plain answer as the final message without recording anything", async () => {
    const { events, entries, run } = turn([user("echo: hello there")]);
    const result = await run();
    expect(result).toEqual({
      stopReason: "stop",
      reply: "hello there",
      finalMessage: { role: "assistant", content: "hello there" },
      iterations: 1,
      // Stored with the final message: the tokens the model reported for this call.
      usage: expect.objectContaining({ model: "model", estimated: false, completionTokens: 3 }),
    });
    expect(entries).toEqual([]);
    const deltas = events.filter((e) => e.type === "text_delta").map((e) => e.text);
    expect(deltas.join("")).toBe("hello there");
    expect(fake.requests[0]!.messages.slice(0, 2)).toEqual([
      { role: "system", content: "You are Keel." },
      { role: "user", content: "echo: hello there" },
    ]);
  });

  it("records the tool-call message, then start before running, then finish, in that order", async () => {
    const seen: boolean[] = [];
    const { entries, journal } = createTestJournal(async () => {
      seen.push(await exists(join(cwd, "marker")));
    });
    const { events, run } = turn([user("run: touch marker && echo made-it")], { journal });
    const result = await run();
    expect(result.stopReason).toBe("stop");
    expect(result.reply).toBe("ran: made-it");
    expect(result.iterations).toBe(2);
    expect(seen).toEqual([false]);
    expect(entries.map((e) => e.kind)).toEqual(["messages", "start", "finish"]);
    const [recorded, start, finish] = entries;
    const call = (recorded as { messages: ChatMessage[] }).messages[0] as {
      tool_calls: ToolCall[];
    };
    expect(call.tool_calls[0]!.function.name).toBe("terminal");
    expect((start as { call: ToolCall }).call).toEqual(call.tool_calls[0]);
    expect((finish as { output: ToolOutput }).output).toEqual({
      output: "made-it\n[exit code 0]",
      isError: false,
    });
    expect(events.map((e) => e.type).filter((t) => t !== "text_delta")).toEqual([
      "tool_start",
      "tool_end",
    ]);
    const second = fake.requests[1]!.messages;
    expect(second.at(-1)).toEqual({
      role: "tool",
      tool_call_id: call.tool_calls[0]!.id,
      content: "made-it\n[exit code 0]",
    });
  });

  it("runs unanswered tool calls of a resumed transcript before calling the model", async () => {
    const history: ChatMessage[] = [
      user("run: echo resumed"),
      {
        role: "assistant",
        content: null,
        tool_calls: [terminalCall("call_a", "echo first"), terminalCall("call_b", "echo resumed")],
      },
      { role: "tool", tool_call_id: "call_a", content: "first\n[exit code 0]" },
    ];
    const { entries, run } = turn(history);
    const result = await run();
    expect(result.reply).toBe("ran: resumed");
    expect(result.iterations).toBe(1);
    expect(entries.map((e) => [e.kind, "call" in e ? e.call.id : ""])).toEqual([
      ["start", "call_b"],
      ["finish", "call_b"],
    ]);
    expect(fake.requests).toHaveLength(1);
    expect(fake.requests[0]!.messages.filter((m) => m.role === "tool")).toHaveLength(2);
  });

  it("hands steered input to the model after the tool batch, recorded first", async () => {
    let steered = ["echo: changed my mind"];
    const { entries, run } = turn([user("run: echo one")], {
      takeSteeredInput: () => {
        const texts = steered;
        steered = [];
        return texts;
      },
    });
    const result = await run();
    expect(result.reply).toBe("changed my mind");
    expect(entries.map((e) => e.kind)).toEqual(["messages", "start", "finish", "messages"]);
    expect(entries[3]).toEqual({ kind: "messages", messages: [user("echo: changed my mind")] });
    const second = fake.requests[1]!.messages;
    expect(second.map((m) => m.role).slice(-2)).toEqual(["tool", "user"]);
  });

  it("on abort mid-tool kills the process group, records the results and stops", async () => {
    fake.script((request) =>
      lastUserText(request) === "go"
        ? {
            toolCalls: [
              { name: "terminal", arguments: { command: "echo $$ > pidfile; sleep 30; echo x" } },
              { name: "terminal", arguments: { command: "touch second" } },
            ],
          }
        : { text: "unexpected" },
    );
    const controller = new AbortController();
    const { entries, run } = turn([user("go")], { signal: controller.signal });
    const pending = run();
    await waitFor(async () => (await readFile(join(cwd, "pidfile"), "utf8")).trim() !== "", {
      timeoutMs: 5000,
    });
    const pid = Number((await readFile(join(cwd, "pidfile"), "utf8")).trim());
    controller.abort();
    const result = await pending;
    expect(result).toMatchObject({ stopReason: "aborted", finalMessage: null, iterations: 1 });
    expect(() => process.kill(pid, 0)).toThrow();
    expect(entries.map((e) => e.kind)).toEqual(["messages", "start", "finish", "start", "finish"]);
    const outputs = entries.flatMap((e) => (e.kind === "finish" ? [e.output] : []));
    expect(outputs[0]!.output).toContain("[interrupted");
    expect(outputs[1]).toEqual({
      output: "Not run: the turn was interrupted before this tool call started.",
      isError: true,
    });
    expect(await exists(join(cwd, "second"))).toBe(false);
    expect(fake.requests).toHaveLength(1);
  });

  it("on abort during the model call stops without recording anything", async () => {
    const controller = new AbortController();
    const { entries, run } = turn([user("slow: 30000 too late")], { signal: controller.signal });
    const pending = run();
    await waitFor(() => fake.requests.length === 1, { timeoutMs: 5000 });
    controller.abort();
    expect(await pending).toMatchObject({ stopReason: "aborted", reply: "", finalMessage: null });
    expect(entries).toEqual([]);
  });

  it("stops at max_iterations with a reply that says so", async () => {
    fake.script({ toolCalls: [{ name: "terminal", arguments: { command: "echo again" } }] });
    const { entries, run } = turn([user("loop forever")], { maxIterations: 3 });
    const result = await run();
    expect(result.stopReason).toBe("max_iterations");
    expect(result.iterations).toBe(3);
    expect(result.reply).toContain("max_iterations");
    expect(result.finalMessage).toEqual({ role: "assistant", content: result.reply });
    expect(fake.requests).toHaveLength(3);
    expect(entries.filter((e) => e.kind === "finish")).toHaveLength(3);
  });

  it("turns a model failure into an error result with a short reply", async () => {
    fake.failNext(500);
    const { run } = turn([user("echo: hi")]);
    const result = await run();
    expect(result).toMatchObject({
      stopReason: "error",
      reply: "The model request failed (HTTP 500). Try again or /retry.",
      finalMessage: null,
      iterations: 1,
    });
    expect(result.errorMessage).toContain("HTTP 500");
  });

  it("shows the model a truncated tool output with the truncation note", async () => {
    const { run } = turn([user("run: head -c 60000 /dev/zero | tr '\\0' z")]);
    const result = await run();
    expect(result.stopReason).toBe("stop");
    const tool = fake.requests[1]!.messages.at(-1)!;
    expect(tool.role).toBe("tool");
    expect(String(tool.content)).toContain("[output truncated: 10000 of 60000 characters cut");
    expect(String(tool.content).length).toBeLessThan(51_000);
  });

  it("lets the model see and recover from unparsable tool arguments", async () => {
    fake.script((request) =>
      request.messages.at(-1)?.role === "tool"
        ? { text: "recovered" }
        : { toolCalls: [{ name: "write_file", arguments: '{"path": "a.txt", "content": ' }] },
    );
    const { entries, run } = turn([user("write something")]);
    const result = await run();
    expect(result.reply).toBe("recovered");
    const finish = entries.find((e) => e.kind === "finish") as { output: ToolOutput };
    expect(finish.output.isError).toBe(true);
    expect(finish.output.output).toContain("not valid JSON");
  });

  it("writes and reads files through the tools", async () => {
    expect((await turn([user("write: notes/a.txt hello file")]).run()).reply).toBe(
      "wrote: Wrote 10 bytes to notes/a.txt.",
    );
    expect((await turn([user("read: notes/a.txt")]).run()).reply).toBe("hello file");
  });

  it("throws when the journal fails, without running the tool", async () => {
    const journal: TurnJournal = {
      recordMessages: async () => {},
      recordToolStart: async () => {
        throw new Error("disk full");
      },
      recordToolFinish: async () => {},
    };
    const { run } = turn([user("run: touch ran")], { journal });
    await expect(run()).rejects.toThrow("disk full");
    expect(await exists(join(cwd, "ran"))).toBe(false);
  });
});

describe("buildPrompt", () => {
  it("puts the system prompt first and answers orphaned tool calls in the request only", () => {
    const history: ChatMessage[] = [
      user("run: x"),
      { role: "assistant", content: null, tool_calls: [terminalCall("c1", "x")] },
      user("hello?"),
    ];
    const prompt = buildPrompt("sys", history);
    expect(prompt.map((m) => m.role)).toEqual(["system", "user", "assistant", "tool", "user"]);
    expect(prompt[3]).toMatchObject({ role: "tool", tool_call_id: "c1" });
    expect(history).toHaveLength(3);
  });
});

async function exists(path: string): Promise<boolean> {
  try {
    await access(path);
    return true;
  } catch {
    return false;
  }
}

describe("runTurn with a tool gate (approvals)", () => {
  const call = (id: string, command: string): ToolCall => ({
    id,
    type: "function",
    function: { name: "terminal", arguments: JSON.stringify({ command }) },
  });

  it("stops at a call that waits: nothing of it runs or is journaled as started, the question is the reply", async () => {
    const history: ChatMessage[] = [
      { role: "user", content: "go" },
      {
        role: "assistant",
        content: null,
        tool_calls: [call("a", "echo one > a.txt"), call("b", "echo two > b.txt")],
      },
    ];
    const t = turn(history, {
      gate: {
        check: async (c) =>
          c.id === "b" ? { kind: "wait", approvalId: "x1", question: "May I?" } : { kind: "run" },
      },
    });
    const result = await t.run();
    expect(result).toMatchObject({ stopReason: "stop", reply: "May I?", awaitingApproval: "x1" });
    expect(result.finalMessage).toBeNull();
    expect(t.entries.filter((e) => e.kind === "start").map((e) => e.call.id)).toEqual(["a"]);
    expect(await readFile(join(cwd, "a.txt"), "utf8")).toBe("one\n");
    await expect(access(join(cwd, "b.txt"))).rejects.toThrow();
    expect(fake.requests).toHaveLength(0);
  });

  it("a skipped call is journaled with the gate's output and the model continues", async () => {
    fake.script({ text: "understood" });
    const t = turn(
      [
        { role: "user", content: "go" },
        { role: "assistant", content: null, tool_calls: [call("a", "echo x > a.txt")] },
      ],
      { gate: { check: async () => ({ kind: "skip", output: "Not run: denied." }) } },
    );
    const result = await t.run();
    expect(result.reply).toBe("understood");
    const finish = t.entries.find((e) => e.kind === "finish");
    expect(finish).toMatchObject({ output: { output: "Not run: denied.", isError: true } });
    await expect(access(join(cwd, "a.txt"))).rejects.toThrow();
    const sent = fake.requests[0]!.messages.find((m) => m.role === "tool");
    expect(sent?.content).toBe("Not run: denied.");
  });
});

describe("a client's functions", () => {
  const weather = {
    type: "function" as const,
    function: { name: "get_weather", parameters: { type: "object" } },
  };
  // Named like Keel's own tool: not offered, Keel's is.
  const shadow = { type: "function" as const, function: { name: "terminal" } };

  it("are offered beside Keel's tools; a call to one ends the turn after Keel's calls ran", async () => {
    fake.script([
      {
        text: "Checking.",
        toolCalls: [
          { id: "call_w", name: "get_weather", arguments: { city: "Oslo" } },
          { id: "call_t", name: "terminal", arguments: { command: "echo local" } },
        ],
      },
    ]);
    const { entries, run } = turn([{ role: "user", content: "weather?" }], {
      clientTools: [weather, shadow],
    });
    const result = await run();
    const offered = (fake.requests[0]!.tools ?? []).map((t) => t.function.name);
    expect(offered.filter((n) => n === "terminal")).toHaveLength(1);
    expect(offered).toContain("get_weather");
    expect(result).toMatchObject({ stopReason: "stop", reply: "Checking.", finalMessage: null });
    expect(result.clientToolCalls?.map((c) => c.id)).toEqual(["call_w"]);
    // The asking message and Keel's own call are journaled; the client's call has no result.
    expect(entries.map((e) => e.kind)).toEqual(["messages", "start", "finish"]);
    expect(fake.requests).toHaveLength(1);
  });

  it("a history ending with their results goes on to the model", async () => {
    fake.script([{ text: "It is cold." }]);
    const { run } = turn(
      [
        { role: "user", content: "weather?" },
        {
          role: "assistant",
          content: null,
          tool_calls: [
            { id: "call_w", type: "function", function: { name: "get_weather", arguments: "{}" } },
          ],
        },
        { role: "tool", tool_call_id: "call_w", content: "-5 °C" },
      ],
      { clientTools: [weather] },
    );
    expect((await run()).reply).toBe("It is cold.");
    expect(fake.requests[0]!.messages.at(-1)).toMatchObject({ role: "tool", content: "-5 °C" });
  });
});
