/**
 * Inbox items written by the scheduler (src/schedules): platform `schedule`, chat = the job's
 * name, message id = the slot's ISO time. The runner treats them as internal work: they wait out
 * a drain or stop in the inbox instead of being refused, queue behind their session's turn
 * instead of interrupting it, and their replies are labelled with the job's name. A job without
 * a chat has the address `schedule:<name>`: its output stays in its session.
 */
import type { ChatAddress } from "../contract/platform.js";

export const SCHEDULE_PLATFORM = "schedule";

export function isScheduledFire(item: { platform: string }): boolean {
  return item.platform === SCHEDULE_PLATFORM;
}

/**
 * Inbox items that start a task's child session (src/tasks): platform `task`, chat = the task
 * id, sender = who asked (`<platform>:<user id>`). Internal work like a fire: never refused.
 */
export const TASK_PLATFORM = "task";

export function isInternalInput(item: { platform: string }): boolean {
  return item.platform === SCHEDULE_PLATFORM || item.platform === TASK_PLATFORM;
}

/** True for the address of a job without a chat: nothing is sent there. */
export function isDetachedAddress(address: ChatAddress): boolean {
  return address.platform === SCHEDULE_PLATFORM;
}

/** A scheduled run's reply as the chat sees it: marked as coming from the job. */
export function labelScheduledReply(jobName: string, text: string): string {
  return `⏰ ${jobName}\n${text}`;
}
