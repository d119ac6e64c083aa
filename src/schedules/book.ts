/**
 * Managing jobs, the same way for the CLI (which edits the store directly), the agent's
 * `schedule` tool and the `/schedules` chat command. Input errors are ScheduleInputError with a
 * message meant for the person (or model) who typed it.
 */
import type { ChatAddress } from "../contract/platform.js";
import { isoTime } from "../lib/wire-time.js";
import type { MisfirePolicy, ScheduleJob, ScheduleStore } from "../sessions/store.js";
import { ScheduleNameTakenError } from "../sessions/store.js";
import { formatDuration, jobSessionKey } from "./fire-message.js";
import { describeTiming, nextSlotAfter, parseTiming, ScheduleInputError } from "./timing.js";

export const MISFIRE_POLICIES: readonly MisfirePolicy[] = ["once", "skip", "all"];

export interface NewJob {
  name: string;
  cron?: string | undefined;
  tz?: string | undefined;
  every?: string | undefined;
  at?: string | undefined;
  prompt: string;
  chat?: ChatAddress | null;
  misfire?: string | undefined;
  createdBy: "cli" | "agent" | "chat";
}

export class ScheduleBook {
  constructor(
    private readonly store: ScheduleStore,
    private readonly now: () => number = Date.now,
    /** Told after every change (the running scheduler looks again at once). */
    private readonly onChange: () => void = () => {},
  ) {}

  async create(input: NewJob): Promise<ScheduleJob> {
    const name = checkName(input.name);
    const prompt = input.prompt.trim();
    if (!prompt)
      throw new ScheduleInputError("A schedule needs a prompt: what should the agent do?");
    const misfire = (input.misfire ?? "once") as MisfirePolicy;
    if (!MISFIRE_POLICIES.includes(misfire)) {
      throw new ScheduleInputError(`Invalid misfire policy "${input.misfire}": once, skip or all.`);
    }
    const { timing, first } = parseTiming(input, this.now());
    try {
      const job = await this.store.createScheduleJob({
        name,
        ...timing,
        prompt,
        sessionKey: jobSessionKey(name),
        chat: input.chat ?? null,
        misfire,
        nextFireAt: first,
        createdBy: input.createdBy,
      });
      this.onChange();
      return job;
    } catch (err) {
      if (err instanceof ScheduleNameTakenError) throw new ScheduleInputError(err.message);
      throw err;
    }
  }

  list(): Promise<ScheduleJob[]> {
    return this.store.listScheduleJobs();
  }

  async delete(name: string): Promise<boolean> {
    const deleted = await this.store.deleteScheduleJob(name);
    if (deleted) this.onChange();
    return deleted;
  }

  async pause(name: string, reason = "paused by hand"): Promise<ScheduleJob | null> {
    const job = await this.store.pauseScheduleJob(name, reason);
    if (job) this.onChange();
    return job;
  }

  /** Resumes from the next slot after now: time spent paused is not caught up. */
  async resume(name: string): Promise<ScheduleJob | null> {
    const job = await this.store.getScheduleJob(name);
    if (!job) return null;
    const now = this.now();
    const anchor = job.nextFireAt ?? now;
    const next = job.kind === "at" ? job.nextFireAt : nextSlotAfter(job, now, anchor);
    const resumed = await this.store.resumeScheduleJob(name, next);
    this.onChange();
    return resumed;
  }
}

function checkName(name: string): string {
  const trimmed = name.trim();
  if (!/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/.test(trimmed)) {
    throw new ScheduleInputError(
      `Invalid schedule name "${name}": letters, digits, ".", "_" and "-", at most 64 characters.`,
    );
  }
  return trimmed;
}

/** One line per job for people: name, timing, state, next and last fire. */
export function describeJob(job: ScheduleJob, now: number): string {
  const state = job.paused ? `paused (${job.pausedReason ?? "by hand"})` : "active";
  const next =
    job.nextFireAt === null
      ? "no next run"
      : `next ${isoTime(job.nextFireAt)}${job.nextFireAt < now ? " (due)" : ""}`;
  const last =
    job.lastFireAt === null
      ? ""
      : `, last ${isoTime(job.lastFireAt)}${
          job.lastFiredLateMs !== null && job.lastFiredLateMs >= 60_000
            ? ` (ran ${formatDuration(job.lastFiredLateMs)} late, catch-up)`
            : ""
        }`;
  const chat = job.chat ? `${job.chat.platform}:${job.chat.chatId}` : "its own session";
  return `${job.name}: ${describeTiming(job)}, ${state}, ${next}${last}; reports to ${chat}; misfire ${job.misfire}`;
}

/** The JSON shape of a job (`keel schedule list --json`, the agent tool). */
export function jobJson(job: ScheduleJob) {
  return {
    name: job.name,
    kind: job.kind,
    expr: job.expr,
    tz: job.tz,
    prompt: job.prompt,
    chat: job.chat ? `${job.chat.platform}:${job.chat.chatId}` : null,
    session_key: job.sessionKey,
    misfire: job.misfire,
    paused: job.paused,
    paused_reason: job.pausedReason,
    next_fire_at: isoTime(job.nextFireAt),
    last_fire_at: isoTime(job.lastFireAt),
    last_fired_late_ms: job.lastFiredLateMs,
    failures: job.failures,
    created_by: job.createdBy,
  };
}
