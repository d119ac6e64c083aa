/**
 * The agent's `delegate` tool: hands a task to a child session. Waiting (the default), the call
 * returns the child's final answer; journaled like any call, and marked safe to run again, so
 * that after a crash the resumed turn calls it again and finds the same task (one per call) still
 * running or already ended, instead of an "outcome unknown". In the background it returns the
 * task id at once, and the result is posted to the chat when the child finishes.
 */
import { z } from "zod";
import { defineTool, toolError } from "../agent/tools/define-tool.js";
import type { Tool } from "../agent/tools/tool.js";
import type { Tasks } from "./task-manager.js";
import { delegateResult } from "./task-texts.js";

const DelegateArgs = z.object({
  task: z.string().min(1).describe("What the sub-agent should do, stated completely"),
  context: z
    .string()
    .optional()
    .describe("What the sub-agent needs to know from this conversation (it sees nothing else)"),
  background: z
    .boolean()
    .optional()
    .describe("true: return at once; the result is posted to this chat when it is ready"),
});

export function createDelegateTool(tasks: () => Tasks | null): Tool {
  return defineTool({
    name: "delegate",
    description:
      "Hand a self-contained task to a sub-agent with its own conversation and the same tools. " +
      "By default you wait for its answer; with background=true you get a task id at once and " +
      "the result is posted to this chat when it is ready.",
    schema: DelegateArgs,
    // Re-running a call finds the task it created: after a crash the wait simply goes on.
    readOnly: true,
    async run(args, context) {
      const manager = tasks();
      const { sessionKey, sessionId, chat, toolCallId } = context;
      if (!manager || !sessionKey || !sessionId || !chat || !toolCallId) {
        return toolError("Delegation is not available here (no chat to report to).");
      }
      const created = await manager.create({
        parentSessionKey: sessionKey,
        parentSessionId: sessionId,
        requestId: toolCallId,
        chat,
        requester: context.requester ?? null,
        prompt: args.task,
        context: args.context ?? null,
        background: args.background === true,
      });
      if (!created.ok) return toolError(created.reason);
      const { task } = created;
      if (task.background) {
        return ok(
          `Task ${task.id} is running in the background; its result will be posted to this chat ` +
            "when it is ready. Tell the user.",
        );
      }
      const ended = await manager.waitFor(task.id, context.signal);
      if (ended) return { output: delegateResult(ended), isError: ended.state !== "done" };
      // This turn was interrupted while it waited: the task goes on and reports to the chat.
      const now = await manager.detach(task.id);
      if (now && now.state !== "queued" && now.state !== "running") {
        return { output: delegateResult(now), isError: now.state !== "done" };
      }
      return ok(
        `[The wait for task ${task.id} was interrupted; it goes on in the background and its ` +
          "result will be posted to this chat.]",
      );
    },
  });
}

function ok(output: string) {
  return { output, isError: false };
}
