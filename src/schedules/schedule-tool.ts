/**
 * The agent's `schedule` tool: create, list, delete, pause and resume scheduled tasks. A task
 * the agent creates reports to the chat of the turn that created it, and a turn sees and manages
 * only the tasks that report to its own chat (as `/schedules` does): one user's agent turn must
 * not list, pause or delete another chat's tasks. A turn without a chat (a detached task's run)
 * sees the tasks without one.
 */
import { z } from "zod";
import { defineTool, toolError } from "../agent/tools/define-tool.js";
import type { Tool } from "../agent/tools/tool.js";
import type { ChatAddress } from "../contract/platform.js";
import type { ScheduleJob } from "../sessions/store.js";
import { describeJob, type ScheduleBook } from "./book.js";
import { ScheduleInputError } from "./timing.js";

const ScheduleArgs = z.object({
  action: z.enum(["create", "list", "delete", "pause", "resume"]),
  name: z.string().optional().describe("The task's name (letters, digits, . _ -)"),
  cron: z
    .string()
    .optional()
    .describe('A cron expression, e.g. "0 8 * * 1-5" for weekdays at 8:00'),
  every: z.string().optional().describe("An interval: 30s, 15m, 2h or 1d"),
  at: z
    .string()
    .optional()
    .describe("One time: +2h (from now), or an ISO time like 2026-12-24T18:00 (in tz)"),
  tz: z.string().optional().describe("IANA time zone for cron and at, e.g. Europe/Berlin"),
  prompt: z.string().optional().describe("What to do each time the task runs"),
});

export function createScheduleTool(book: () => ScheduleBook | null, now: () => number): Tool {
  return defineTool({
    name: "schedule",
    description:
      "Manage scheduled tasks: each run gives you the prompt as a new message, and your answer " +
      "is sent to this chat. action=create needs name, prompt and one of cron (with optional " +
      "tz), every or at; list shows this chat's tasks; delete, pause and resume need name.",
    schema: ScheduleArgs,
    readOnly: false,
    async run(args, context) {
      const schedules = book();
      if (!schedules) return toolError("Scheduled tasks are not available here.");
      const chat = context.chat ?? null;
      const mine = async () => (await schedules.list()).filter((job) => reportsTo(job, chat));
      try {
        switch (args.action) {
          case "list": {
            const jobs = await mine();
            if (jobs.length === 0) return ok("No scheduled tasks.");
            return ok(jobs.map((job) => describeJob(job, now())).join("\n"));
          }
          case "create": {
            const job = await schedules.create({
              name: args.name ?? "",
              cron: args.cron,
              tz: args.tz,
              every: args.every,
              at: args.at,
              prompt: args.prompt ?? "",
              chat,
              createdBy: "agent",
            });
            return ok(`Created. ${describeJob(job, now())}`);
          }
          default: {
            const name = args.name ?? "";
            // Another chat's task is out of reach: the answer is the same as for no task at all.
            if (!(await mine()).some((job) => job.name === name)) {
              return toolError(`There is no scheduled task named "${name}".`);
            }
            const job =
              args.action === "delete"
                ? (await schedules.delete(name))
                  ? name
                  : null
                : args.action === "pause"
                  ? await schedules.pause(name)
                  : await schedules.resume(name);
            if (!job) return toolError(`There is no scheduled task named "${name}".`);
            return ok(
              typeof job === "string" ? `Deleted ${name}.` : `Done. ${describeJob(job, now())}`,
            );
          }
        }
      } catch (err) {
        if (err instanceof ScheduleInputError) return toolError(err.message);
        throw err;
      }
    },
  });
}

function reportsTo(job: ScheduleJob, chat: ChatAddress | null): boolean {
  if (!job.chat || !chat) return !job.chat && !chat;
  return job.chat.platform === chat.platform && job.chat.chatId === chat.chatId;
}

function ok(output: string) {
  return { output, isError: false };
}
