/**
 * ScheduleStore (scheduled jobs) on SQLite; what each method promises is in roles.ts.
 * Writes run in the group commit (`s.tx`), reads through `s.read`.
 */
import type { ScheduleStore } from "../roles.js";
import {
  moveScheduleCursor,
  resetSessionSync,
  type SqliteContext,
  sessionRow,
} from "../sqlite-shared.js";
import type { ScheduleJob, ScheduleJobInput } from "../store.js";
import { ScheduleNameTakenError } from "../store.js";
import { type ScheduleJobRow, toScheduleJob } from "../store-rows.js";

function scheduleRow(s: SqliteContext, name: string): ScheduleJobRow | undefined {
  return s.stmt("SELECT * FROM schedule_jobs WHERE name = ?").get(name) as
    | ScheduleJobRow
    | undefined;
}

export function sqliteSchedules(s: SqliteContext): ScheduleStore {
  return {
    createScheduleJob(input: ScheduleJobInput): Promise<ScheduleJob> {
      return s.tx(() => {
        if (scheduleRow(s, input.name)) throw new ScheduleNameTakenError(input.name);
        const now = s.now();
        s.stmt(
          `INSERT INTO schedule_jobs (name, kind, expr, tz, prompt, session_key, chat, misfire,
               next_fire_at, created_by, created_at, updated_at)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
        ).run(
          input.name,
          input.kind,
          input.expr,
          input.tz,
          input.prompt,
          input.sessionKey,
          input.chat ? JSON.stringify(input.chat) : null,
          input.misfire,
          input.nextFireAt,
          input.createdBy,
          now,
          now,
        );
        // A name used before (a deleted job, a one-shot that ran) left its session behind: the new
        // job, perhaps another chat's, starts a fresh transcript instead of inheriting that one.
        if (sessionRow(s, input.sessionKey)) resetSessionSync(s, input.sessionKey);
        return toScheduleJob(scheduleRow(s, input.name)!);
      });
    },

    listScheduleJobs(): Promise<ScheduleJob[]> {
      return s.read(() =>
        (s.stmt("SELECT * FROM schedule_jobs ORDER BY name").all() as ScheduleJobRow[]).map(
          toScheduleJob,
        ),
      );
    },

    getScheduleJob(name: string): Promise<ScheduleJob | null> {
      return s.read(() => {
        const row = scheduleRow(s, name);
        return row ? toScheduleJob(row) : null;
      });
    },

    deleteScheduleJob(name: string): Promise<boolean> {
      return s.tx(() => s.stmt("DELETE FROM schedule_jobs WHERE name = ?").run(name).changes === 1);
    },

    skipScheduleSlots(
      jobId: number,
      expectedNextFireAt: number,
      nextFireAt: number | null,
    ): Promise<boolean> {
      return s.tx(() => moveScheduleCursor(s, { jobId, expectedNextFireAt, nextFireAt }));
    },

    pauseScheduleJob(name: string, reason: string): Promise<ScheduleJob | null> {
      return s.tx(() => {
        s.stmt(
          "UPDATE schedule_jobs SET paused = 1, paused_reason = ?, updated_at = ? WHERE name = ?",
        ).run(reason, s.now(), name);
        const row = scheduleRow(s, name);
        return row ? toScheduleJob(row) : null;
      });
    },

    resumeScheduleJob(name: string, nextFireAt: number | null): Promise<ScheduleJob | null> {
      return s.tx(() => {
        s.stmt(
          `UPDATE schedule_jobs SET paused = 0, paused_reason = NULL, failures = 0, next_fire_at = ?,
               updated_at = ? WHERE name = ?`,
        ).run(nextFireAt, s.now(), name);
        const row = scheduleRow(s, name);
        return row ? toScheduleJob(row) : null;
      });
    },

    recordScheduleRun(
      name: string,
      ok: boolean,
      pauseAfter: number,
    ): Promise<{ job: ScheduleJob; pausedNow: boolean } | null> {
      return s.tx(() => {
        const row = scheduleRow(s, name);
        if (!row) return null;
        const failures = ok ? 0 : row.failures + 1;
        const pausedNow = !ok && row.paused === 0 && failures >= pauseAfter;
        s.stmt(
          `UPDATE schedule_jobs SET failures = ?, paused = ?, paused_reason = ?, updated_at = ?
             WHERE id = ?`,
        ).run(
          failures,
          pausedNow ? 1 : row.paused,
          pausedNow ? `${failures} failed runs in a row` : row.paused_reason,
          s.now(),
          row.id,
        );
        return { job: toScheduleJob(scheduleRow(s, name)!), pausedNow };
      });
    },
  };
}
