/**
 * `/schedules` in a chat: lists the scheduled tasks that report to this chat, numbered, and
 * pauses, resumes or deletes one by its number (`/schedules pause 2`).
 */
import type { InboxItem } from "../sessions/store.js";
import { describeJob, type ScheduleBook } from "./book.js";

const USAGE = "Use /schedules, or /schedules pause N, /schedules resume N, /schedules delete N.";

export async function schedulesCommand(
  book: ScheduleBook,
  item: InboxItem,
  args: string,
  now: number,
): Promise<string> {
  const here = (await book.list()).filter(
    (job) =>
      job.chat?.platform === item.address.platform && job.chat.chatId === item.address.chatId,
  );
  const [verb, number] = args.split(/\s+/).filter(Boolean);
  if (!verb) {
    if (here.length === 0) return "⏰ No scheduled tasks report to this chat.";
    const lines = here.map((job, i) => `${i + 1}. ${describeJob(job, now)}`);
    return ["⏰ Scheduled tasks for this chat:", ...lines, USAGE].join("\n");
  }
  const index = Number(number);
  const job = Number.isInteger(index) ? here[index - 1] : undefined;
  if (!["pause", "resume", "delete"].includes(verb) || !job) {
    return `${job || !number ? "" : `There is no task number ${number}. `}${USAGE}`;
  }
  if (verb === "delete") {
    await book.delete(job.name);
    return `🗑 Deleted ${job.name}.`;
  }
  const changed = verb === "pause" ? await book.pause(job.name) : await book.resume(job.name);
  return changed ? `✅ ${describeJob(changed, now)}` : `${job.name} no longer exists.`;
}
