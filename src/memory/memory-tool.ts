/**
 * The agent's `memory` tool: notes about the user that outlive `/new` and compaction. It edits
 * only the memory file of the user whose message the turn answers.
 */
import { z } from "zod";
import { defineTool, toolError } from "../agent/tools/define-tool.js";
import type { Tool } from "../agent/tools/tool.js";
import { MEMORY_MAX_BYTES, MemoryError, MemoryFile } from "./memory-file.js";

const MemoryArgs = z.object({
  action: z.enum(["add", "replace", "remove", "read"]),
  text: z.string().optional().describe("The entry to add, or the new text for replace"),
  old_text: z
    .string()
    .optional()
    .describe("For replace and remove: a piece of the existing entry, unique to it"),
});

export function createMemoryTool(home: string): Tool {
  return defineTool({
    name: "memory",
    description:
      "Your long-term notes about the user you are talking to (preferences, facts about them, " +
      `ongoing projects), kept across conversations; at most ${MEMORY_MAX_BYTES} bytes. ` +
      "add saves text as a new entry, replace changes the entry containing old_text to text, " +
      "remove deletes the entry containing old_text, read shows everything. Save only what " +
      "will matter later, never secrets.",
    schema: MemoryArgs,
    readOnly: false,
    async run(args, context) {
      if (!context.memoryUser) {
        return toolError(
          "Memory is not available here: it is kept per user and used only in direct chats.",
        );
      }
      const file = new MemoryFile(home, context.memoryUser);
      try {
        switch (args.action) {
          case "read":
            return ok(file.read().trim() || "(memory is empty)");
          case "add":
            return ok(file.add(args.text ?? ""));
          case "replace":
            return ok(file.replace(args.old_text ?? "", args.text ?? ""));
          case "remove":
            return ok(file.remove(args.old_text ?? ""));
        }
      } catch (error) {
        if (error instanceof MemoryError) return toolError(error.message);
        throw error;
      }
    },
  });
}

function ok(output: string) {
  return { output, isError: false };
}
