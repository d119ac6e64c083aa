/**
 * A fire as the runner receives it: an inbound message on the `schedule` platform whose message
 * id is the slot (so the inbox stores each slot of a job once), in the job's own session, with
 * the job's prompt under a header that tells the model which task this is and, for a late run,
 * how late it is.
 */
import type { ChatAddress, InboundMessage } from "../contract/platform.js";
import { SCHEDULE_PLATFORM } from "../runner/scheduled-input.js";
import type { ScheduleJob } from "../sessions/store.js";
import type { Fire } from "./misfire.js";

const SESSION_PREFIX = "agent:main:schedule:";

/** The session a job's runs happen in. */
export function jobSessionKey(name: string): string {
  return `${SESSION_PREFIX}${name}`;
}

/** The job name of a job's session key, or null for any other session. */
export function jobNameOfSession(sessionKey: string): string | null {
  return sessionKey.startsWith(SESSION_PREFIX) ? sessionKey.slice(SESSION_PREFIX.length) : null;
}

/** Where a job's replies go: its chat, or its own detached address (they stay in its session). */
export function jobAddress(job: Pick<ScheduleJob, "name" | "chat">): ChatAddress {
  return job.chat ?? { platform: SCHEDULE_PLATFORM, chatId: job.name };
}

export function fireMessage(job: ScheduleJob, fire: Fire): InboundMessage {
  const due = new Date(fire.slot).toISOString();
  const note = fireNote(fire);
  return {
    platform: SCHEDULE_PLATFORM,
    chatId: job.name,
    platformMessageId: due,
    sessionKey: job.sessionKey,
    text: `[Scheduled task "${job.name}", due ${due}${note ? `. Note: ${note}` : ""}]\n${job.prompt}`,
    senderName: "scheduler",
    address: jobAddress(job),
  };
}

/** What the model is told about a late run, or about earlier runs that will not happen. */
function fireNote(fire: Fire): string {
  const runs = (n: number) => `${n} earlier run${n === 1 ? " was" : "s were"}`;
  if (!fire.catchUp) return fire.dropped > 0 ? `${runs(fire.dropped)} skipped (misfire skip).` : "";
  const late = fire.lateMs >= 1000 ? `, ${formatDuration(fire.lateMs)} late` : "";
  const dropped = fire.dropped > 0 ? ` ${runs(fire.dropped)} missed and will not run.` : "";
  return (
    `this is a catch-up run${late} (the gateway was not running, was drained, or the previous ` +
    `run had not finished).${dropped}`
  );
}

/** `3 h 5 min`, `12 min 4 s`, `7 s`. */
export function formatDuration(ms: number): string {
  const s = Math.round(ms / 1000);
  const parts: string[] = [];
  const d = Math.floor(s / 86_400);
  const h = Math.floor((s % 86_400) / 3600);
  const m = Math.floor((s % 3600) / 60);
  const sec = s % 60;
  if (d) parts.push(`${d} d`);
  if (h) parts.push(`${h} h`);
  if (m && !d) parts.push(`${m} min`);
  if ((sec && !d && !h) || parts.length === 0) parts.push(`${sec} s`);
  return parts.join(" ");
}
