/**
 * ScheduleStore (scheduled jobs) on Postgres; what each method promises is in roles.ts.
 * Writes run in one transaction each (`s.tx`), reads in one snapshot (`s.read`).
 */
import {
  all,
  changes,
  type Db,
  first,
  moveScheduleCursor,
  type PgContext,
  resetSessionIn,
  sessionRow,
} from "../pg-shared.js";
import type { ScheduleStore } from "../roles.js";
import type { ScheduleJob, ScheduleJobInput } from "../store.js";
import { ScheduleNameTakenError } from "../store.js";
import { flag, type ScheduleJobRow, toScheduleJob } from "../store-rows.js";

function scheduleRow(db: Db, name: string): Promise<ScheduleJobRow | undefined> {
  return first<ScheduleJobRow>(db, "SELECT * FROM schedule_jobs WHERE name = $1", [name]);
}

export function pgSchedules(s: PgContext): ScheduleStore {
  return {
    createScheduleJob(input: ScheduleJobInput): Promise<ScheduleJob> {
      return s.tx(async (db) => {
        const now = s.now();
        const row = await first<ScheduleJobRow>(
          db,
          `INSERT INTO schedule_jobs (name, kind, expr, tz, prompt, session_key, chat, misfire,
               next_fire_at, created_by, created_at, updated_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $11)
             ON CONFLICT (name) DO NOTHING RETURNING *`,
          [
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
          ],
        );
        if (!row) throw new ScheduleNameTakenError(input.name);
        // A name used before left its session behind: the new job starts a fresh transcript.
        if (await sessionRow(db, input.sessionKey)) {
          await resetSessionIn(s, db, input.sessionKey);
        }
        return toScheduleJob(row);
      });
    },

    listScheduleJobs(): Promise<ScheduleJob[]> {
      return s.read(async (db) =>
        (await all<ScheduleJobRow>(db, "SELECT * FROM schedule_jobs ORDER BY name")).map(
          toScheduleJob,
        ),
      );
    },

    getScheduleJob(name: string): Promise<ScheduleJob | null> {
      return s.read(async (db) => {
        const row = await scheduleRow(db, name);
        return row ? toScheduleJob(row) : null;
      });
    },

    deleteScheduleJob(name: string): Promise<boolean> {
      return s.tx(
        async (db) =>
          (await changes(db, "DELETE FROM schedule_jobs WHERE name = $1", [name])) === 1,
      );
    },

    skipScheduleSlots(
      jobId: number,
      expectedNextFireAt: number,
      nextFireAt: number | null,
    ): Promise<boolean> {
      return s.tx((db) => moveScheduleCursor(s, db, { jobId, expectedNextFireAt, nextFireAt }));
    },

    pauseScheduleJob(name: string, reason: string): Promise<ScheduleJob | null> {
      return s.tx(async (db) => {
        const row = await first<ScheduleJobRow>(
          db,
          `UPDATE schedule_jobs SET paused = TRUE, paused_reason = $1, updated_at = $2
             WHERE name = $3 RETURNING *`,
          [reason, s.now(), name],
        );
        return row ? toScheduleJob(row) : null;
      });
    },

    resumeScheduleJob(name: string, nextFireAt: number | null): Promise<ScheduleJob | null> {
      return s.tx(async (db) => {
        const row = await first<ScheduleJobRow>(
          db,
          `UPDATE schedule_jobs SET paused = FALSE, paused_reason = NULL, failures = 0,
               next_fire_at = $1, updated_at = $2 WHERE name = $3 RETURNING *`,
          [nextFireAt, s.now(), name],
        );
        return row ? toScheduleJob(row) : null;
      });
    },

    recordScheduleRun(
      name: string,
      ok: boolean,
      pauseAfter: number,
    ): Promise<{ job: ScheduleJob; pausedNow: boolean } | null> {
      return s.tx(async (db) => {
        const row = await first<ScheduleJobRow>(
          db,
          "SELECT * FROM schedule_jobs WHERE name = $1 FOR UPDATE",
          [name],
        );
        if (!row) return null;
        const failures = ok ? 0 : row.failures + 1;
        const pausedNow = !ok && !flag(row.paused) && failures >= pauseAfter;
        const updated = await first<ScheduleJobRow>(
          db,
          `UPDATE schedule_jobs SET failures = $1, paused = $2, paused_reason = $3, updated_at = $4
             WHERE id = $5 RETURNING *`,
          [
            failures,
            pausedNow || flag(row.paused),
            pausedNow ? `${failures} failed runs in a row` : row.paused_reason,
            s.now(),
            row.id,
          ],
        );
        return { job: toScheduleJob(updated!), pausedNow };
      });
    },
  };
}
