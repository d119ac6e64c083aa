/**
 * A model in this process for the agent loop's unit tests: it answers each call with the next
 * step of a script (text, tool calls, a failure, or a call that hangs until the turn is
 * interrupted) and keeps every request it got. No HTTP, no shell: pair it with `scriptedTool`.
 * The loopback stand-in (openai-server.ts) stays the model for everything that goes through the
 * real client.
 */
import type { Tool, ToolContext, ToolOutput } from "../../src/agent/tools/tool.js";
import type {
  LlmClient,
  LlmFailureKind,
  LlmRequest,
  LlmResult,
  ToolCall,
} from "../../src/agent/types.js";

export type ScriptStep =
  /** Answers with text (streamed in `deltas` pieces when given). */
  | { text: string; deltas?: string[] }
  /** Asks for tools; ids default to `call_<n>`. */
  | { tools: { name: string; arguments?: unknown; id?: string }[]; text?: string }
  | { fail: LlmFailureKind; status?: number; error?: string }
  /** Hangs until the request's signal aborts (an interrupt during a model call). */
  | { hang: true }
  /** Decides from the request (e.g. to answer what the last tool returned). */
  | ((request: LlmRequest) => ScriptStep);

export interface ScriptedModel extends LlmClient {
  /** Every request, in order, as the loop sent it. */
  readonly requests: LlmRequest[];
}

export function scriptedModel(steps: ScriptStep[]): ScriptedModel {
  const requests: LlmRequest[] = [];
  let callCounter = 0;
  const answer = async (step: ScriptStep, request: LlmRequest): Promise<LlmResult> => {
    if (typeof step === "function") return answer(step(request), request);
    if ("hang" in step) {
      await new Promise<void>((resolve) => {
        if (request.signal.aborted) resolve();
        request.signal.addEventListener("abort", () => resolve(), { once: true });
      });
      return { ok: false, kind: "aborted", error: "The request was aborted." };
    }
    if ("fail" in step) {
      return {
        ok: false,
        kind: step.fail,
        ...(step.status !== undefined && { status: step.status }),
        error: step.error ?? `scripted ${step.fail} failure`,
      };
    }
    if ("tools" in step) {
      const tool_calls: ToolCall[] = step.tools.map((tool) => {
        callCounter += 1;
        return {
          id: tool.id ?? `call_${callCounter}`,
          type: "function",
          function: { name: tool.name, arguments: JSON.stringify(tool.arguments ?? {}) },
        };
      });
      return {
        ok: true,
        message: { role: "assistant", content: step.text ?? null, tool_calls },
        finishReason: "tool_calls",
      };
    }
    for (const delta of step.deltas ?? [step.text]) request.onTextDelta?.(delta);
    return { ok: true, message: { role: "assistant", content: step.text }, finishReason: "stop" };
  };
  return {
    requests,
    async complete(request) {
      // A copy: the loop keeps appending to its own array after the call.
      requests.push({ ...request, messages: [...request.messages] });
      if (request.signal.aborted) return { ok: false, kind: "aborted", error: "aborted" };
      const step = steps.shift();
      if (!step) {
        return {
          ok: false,
          kind: "invalid",
          error: `the script has no step for call ${requests.length}`,
        };
      }
      return answer(step, request);
    },
  };
}

/** A tool that runs a function in this process and records the arguments it was called with. */
export function scriptedTool(
  name: string,
  run: (args: unknown, context: ToolContext) => ToolOutput | Promise<ToolOutput>,
  options: { readOnly?: boolean } = {},
): Tool & { calls: unknown[] } {
  const calls: unknown[] = [];
  return {
    name,
    description: `scripted ${name}`,
    parameters: { type: "object", properties: {}, additionalProperties: true },
    readOnly: options.readOnly ?? false,
    calls,
    async execute(args, context) {
      calls.push(args);
      return run(args, context);
    },
  };
}
