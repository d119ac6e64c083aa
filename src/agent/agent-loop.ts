/**
 * One turn of the agent: model call, tool calls, model call... until the model answers without
 * tools, the turn is interrupted, it fails, or it runs out of iterations.
 */
import type {
  AssistantMessage,
  CallUsage,
  ChatMessage,
  GateVerdict,
  LlmResult,
  ModelCallVerdict,
  PreparedPrompt,
  RunTurnOptions,
  ToolCall,
  TurnResult,
} from "./types.js";

/** Sent to the model for a tool call that has no result in the transcript. */
const MISSING_RESULT =
  "No result was recorded for this tool call (the gateway may have stopped while it ran); " +
  "its outcome is unknown.";

const NOT_RUN_RESULT = "Not run: the turn was interrupted before this tool call started.";

/**
 * Runs one turn over `history` (the stored transcript, ending with the new input).
 *
 * Persistence goes through `options.journal`, awaited in order: an assistant message that asks for
 * tools is recorded before any of them runs; each tool call is recorded as started before it runs
 * and as finished after (the journal appends the `tool` message); steered user input is recorded
 * before the next model call. The final assistant message is not recorded: it is returned as
 * `finalMessage` for the caller to store with the reply.
 *
 * If `history` ends with an assistant message whose tool calls lack results, the missing calls
 * run first. Never throws for model or tool failures (they are `stopReason` values); a journal
 * failure is thrown as is.
 */
export async function runAgentLoop(options: RunTurnOptions): Promise<TurnResult> {
  const messages = [...options.history];
  let iterations = 0;
  const pending = unansweredToolCalls(messages);
  if (pending.length > 0) {
    const outcome = await runToolBatch(pending, messages, options);
    if (outcome !== "done") return stoppedAt(outcome, iterations);
    await takeSteeredInput(messages, options);
  }
  for (;;) {
    if (options.signal.aborted) return aborted(iterations);
    if (iterations >= options.maxIterations) return outOfIterations(iterations);
    const verdict = options.modelGate ? await options.modelGate.check() : null;
    if (verdict && verdict.kind !== "go") return heldBeforeCall(verdict, iterations);
    iterations++;
    const called = await callModel(messages, options);
    if (options.signal.aborted) return aborted(iterations);
    if ("error" in called) return tooLong(called.error, iterations);
    const { result, usage } = called;
    if (!result.ok) {
      if (options.signal.aborted || result.kind === "aborted") return aborted(iterations);
      return failed(result, iterations);
    }
    const calls = result.message.tool_calls ?? [];
    if (calls.length === 0) return finished(result.message, iterations, usage);
    await options.journal.recordMessages([result.message], usage);
    messages.push(result.message);
    const outcome = await runToolBatch(calls, messages, options);
    if (outcome !== "done") return stoppedAt(outcome, iterations, result.message.content ?? "");
    await takeSteeredInput(messages, options);
  }
}

/**
 * One model call over `messages`. With a keeper, the prompt is first fitted to the window (which
 * may summarise older messages: they are then removed from `messages`), and a model's
 * `context_length_exceeded` gets one forced compaction and one more call.
 */
async function callModel(
  messages: ChatMessage[],
  options: RunTurnOptions,
): Promise<{ result: LlmResult; usage?: CallUsage } | { error: string }> {
  // A client function named like one of Keel's tools is not offered: the name is Keel's.
  const clientTools = (options.clientTools ?? []).filter(
    (t) => !options.tools.get(t.function.name),
  );
  const tools = [...options.tools.specs(), ...clientTools];
  const keeper = options.keeper;
  for (let overflowRetry = 0; ; overflowRetry++) {
    let prepared: PreparedPrompt = {
      ok: true,
      prompt: buildPrompt(options.systemPrompt, messages),
      estimate: 0,
      dropped: 0,
    };
    if (keeper) {
      prepared = await keeper.prepare(
        options.systemPrompt,
        messages,
        tools,
        options.signal,
        overflowRetry > 0,
      );
      if (prepared.dropped) messages.splice(0, prepared.dropped);
      if (!prepared.ok) return { error: prepared.error };
    }
    const prompt = (prepared as Extract<PreparedPrompt, { ok: true }>).prompt;
    const result = await options.llm.complete({
      messages: prompt,
      tools,
      signal: options.signal,
      ...(options.preferredModel && { preferred: options.preferredModel }),
      onTextDelta: (text) => options.onEvent({ type: "text_delta", text }),
    });
    if (!result.ok) {
      if (keeper && result.kind === "context_exceeded" && overflowRetry === 0) {
        keeper.overflowed();
        continue;
      }
      return { result };
    }
    keeper?.observe(prompt, tools, result.usage);
    const estimate = (prepared as Extract<PreparedPrompt, { ok: true }>).estimate;
    const usage: CallUsage = {
      model: result.model ?? options.preferredModel ?? "model",
      ...(result.usage ?? {
        promptTokens: estimate || Math.ceil(JSON.stringify(prompt).length / 4),
        completionTokens: Math.ceil(JSON.stringify(result.message).length / 4),
        estimated: true,
      }),
    };
    return { result, usage };
  }
}

/**
 * Runs the calls one by one, journaled, appending each `tool` message to `messages`. Once the
 * turn is interrupted, the remaining calls are recorded with a "not run" result so the transcript
 * stays valid. A call the gate holds for approval stops the batch: it and the calls after it stay
 * without results, for the turn that continues once a human answers.
 */
async function runToolBatch(
  calls: ToolCall[],
  messages: ChatMessage[],
  options: RunTurnOptions,
): Promise<"done" | "aborted" | Extract<GateVerdict, { kind: "wait" }> | ClientCalls> {
  const { journal, signal } = options;
  const clientNames = new Set((options.clientTools ?? []).map((t) => t.function.name));
  // The client's functions are its to run: collected, and the turn ends with them once the
  // calls Keel runs itself are done. They stay without results in the transcript meanwhile.
  const forClient: ToolCall[] = [];
  for (const call of calls) {
    if (clientNames.has(call.function.name) && !options.tools.get(call.function.name)) {
      forClient.push(call);
      continue;
    }
    const verdict: GateVerdict =
      options.gate && !signal.aborted
        ? await options.gate.check(call, options.tools.get(call.function.name))
        : { kind: "run" };
    if (verdict.kind === "wait") return verdict;
    await journal.recordToolStart(call);
    let output = { output: NOT_RUN_RESULT, isError: true };
    if (verdict.kind === "skip") {
      output = { output: verdict.output, isError: true };
    } else if (!signal.aborted) {
      const { id: toolCallId, function: fn } = call;
      options.onEvent({ type: "tool_start", toolCallId, name: fn.name, arguments: fn.arguments });
      output = await options.tools.run(call, {
        cwd: options.cwd,
        signal,
        ...(options.chat && { chat: options.chat }),
        ...(options.memoryUser && { memoryUser: options.memoryUser }),
        ...(options.sessionId && { sessionId: options.sessionId }),
        ...(options.sessionKey && { sessionKey: options.sessionKey }),
        ...(options.requester && { requester: options.requester }),
        toolCallId,
      });
      const { output: text, isError } = output;
      options.onEvent({ type: "tool_end", toolCallId, name: fn.name, output: text, isError });
    }
    await journal.recordToolFinish(call, output);
    messages.push({ role: "tool", tool_call_id: call.id, content: output.output });
  }
  if (signal.aborted) return "aborted";
  return forClient.length > 0 ? { kind: "client", calls: forClient } : "done";
}

interface ClientCalls {
  kind: "client";
  calls: ToolCall[];
}

/**
 * How a turn ends when its tool batch did not finish: interrupted, parked for approval, or
 * handed to the client for its functions (`text`: what the model wrote beside those calls).
 */
function stoppedAt(
  outcome: "aborted" | Extract<GateVerdict, { kind: "wait" }> | ClientCalls,
  iterations: number,
  text = "",
): TurnResult {
  if (outcome === "aborted") return aborted(iterations);
  if (outcome.kind === "client") {
    return {
      stopReason: "stop",
      reply: text,
      finalMessage: null,
      clientToolCalls: outcome.calls,
      iterations,
    };
  }
  return awaitingAnswer(outcome.approvalId, outcome.question, iterations);
}

/**
 * The turn ends waiting for a person's answer (an approval, a budget pause): its question, if
 * any, is the reply; the transcript is left for the turn that continues.
 */
function awaitingAnswer(id: string, question: string | null, iterations: number): TurnResult {
  return {
    stopReason: "stop",
    reply: question ?? "",
    finalMessage: null,
    awaitingApproval: id,
    iterations,
  };
}

/**
 * A budget held the model call: the turn waits for an operator (its question is the reply, the
 * transcript unchanged for the turn that continues), or ends with the denial recorded.
 */
function heldBeforeCall(
  verdict: Exclude<ModelCallVerdict, { kind: "go" }>,
  iterations: number,
): TurnResult {
  if (verdict.kind === "wait") return awaitingAnswer(verdict.pauseId, verdict.question, iterations);
  return {
    stopReason: "stop",
    reply: verdict.reply,
    finalMessage: { role: "assistant", content: verdict.reply },
    iterations,
  };
}

async function takeSteeredInput(messages: ChatMessage[], options: RunTurnOptions): Promise<void> {
  const texts = options.takeSteeredInput?.() ?? [];
  if (texts.length === 0) return;
  const steered = texts.map((content): ChatMessage => ({ role: "user", content }));
  await options.journal.recordMessages(steered);
  messages.push(...steered);
}

/** The tool calls of a trailing assistant message (followed only by tool results) that have no result yet. */
export function unansweredToolCalls(messages: ChatMessage[]): ToolCall[] {
  const index = messages.findLastIndex((m) => m.role === "assistant");
  const assistant = messages[index];
  if (assistant?.role !== "assistant" || !assistant.tool_calls) return [];
  const answered = new Set<string>();
  for (const message of messages.slice(index + 1)) {
    if (message.role !== "tool") return [];
    answered.add(message.tool_call_id);
  }
  return assistant.tool_calls.filter((call) => !answered.has(call.id));
}

/**
 * The messages sent to the model: the system prompt, then the transcript. A tool call left
 * without a result (e.g. a crash before the journal could record it) gets a placeholder result,
 * because the API rejects a transcript with unanswered tool calls. Only the request is patched.
 */
export function buildPrompt(systemPrompt: string, messages: ChatMessage[]): ChatMessage[] {
  const prompt: ChatMessage[] = systemPrompt ? [{ role: "system", content: systemPrompt }] : [];
  let open: ToolCall[] = [];
  const closeOpen = () => {
    for (const call of open) {
      prompt.push({ role: "tool", tool_call_id: call.id, content: MISSING_RESULT });
    }
    open = [];
  };
  for (const message of messages) {
    if (message.role === "tool") {
      open = open.filter((call) => call.id !== message.tool_call_id);
    } else {
      closeOpen();
      if (message.role === "assistant") open = [...(message.tool_calls ?? [])];
    }
    prompt.push(message);
  }
  closeOpen();
  return prompt;
}

function finished(message: AssistantMessage, iterations: number, usage?: CallUsage): TurnResult {
  return {
    stopReason: "stop",
    reply: message.content ?? "",
    finalMessage: message,
    iterations,
    ...(usage && { usage }),
  };
}

/** No prompt fits the window: the user is told what happened and what to do. */
function tooLong(error: string, iterations: number): TurnResult {
  return { stopReason: "error", reply: error, finalMessage: null, errorMessage: error, iterations };
}

function aborted(iterations: number): TurnResult {
  return {
    stopReason: "aborted",
    reply: "",
    finalMessage: null,
    errorMessage: "The turn was interrupted.",
    iterations,
  };
}

function outOfIterations(iterations: number): TurnResult {
  const reply =
    `I stopped after ${iterations} model calls, the limit for one turn (agent.max_iterations), ` +
    "before finishing. Send a message to let me continue.";
  return {
    stopReason: "max_iterations",
    reply,
    // Stored so the next turn's model knows it was cut off, and the transcript ends cleanly.
    finalMessage: { role: "assistant", content: reply },
    errorMessage: `Reached max_iterations (${iterations}).`,
    iterations,
  };
}

function failed(result: Extract<LlmResult, { ok: false }>, iterations: number): TurnResult {
  const what = {
    http: `The model request failed${result.status ? ` (HTTP ${result.status})` : ""}.`,
    timeout: "The model did not answer in time.",
    network: "The model could not be reached.",
    invalid: "The model sent an unusable response.",
    aborted: "The model request was interrupted.",
    context_exceeded:
      "The conversation is too long for the model even after summarising it. Send /compact, or /new to start fresh.",
  }[result.kind];
  return {
    stopReason: "error",
    reply: `${what} Try again or /retry.`,
    finalMessage: null,
    errorMessage: result.error,
    iterations,
  };
}
