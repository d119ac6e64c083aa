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
  pgSql,
  resetSessionIn,
  sessionRow,
} from "../pg-shared.js";
import type { ScheduleStore } from "../roles.js";
import { ScheduleNameTakenError } from "../store.js";
import { type ScheduleJobRow, toScheduleJob } from "../store-rows.js";
import * as sql from "./statements.js";

function scheduleRow(db: Db, name: string): Promise<ScheduleJobRow | undefined> {
  return first<ScheduleJobRow>(db, pgSql(sql.SELECT_JOB), [name]);
}

export function pgSchedules(s: PgContext): ScheduleStore {
  return {
    createScheduleJob(input) {
      return s.tx(async (db) => {
        const params = sql.jobParams(input, s.now());
        const row = await first<ScheduleJobRow>(db, pgSql(sql.INSERT_JOB), params);
        if (!row) throw new ScheduleNameTakenError(input.name);
        // A name used before left its session behind: the new job starts a fresh transcript.
        if (await sessionRow(db, input.sessionKey)) {
          await resetSessionIn(s, db, input.sessionKey);
        }
        return toScheduleJob(row);
      });
    },

    listScheduleJobs() {
      return s.read(async (db) =>
        (await all<ScheduleJobRow>(db, sql.LIST_JOBS)).map(toScheduleJob),
      );
    },

    getScheduleJob(name) {
      return s.read(async (db) => {
        const row = await scheduleRow(db, name);
        return row ? toScheduleJob(row) : null;
      });
    },

    deleteScheduleJob(name) {
      return s.tx(async (db) => (await changes(db, pgSql(sql.DELETE_JOB), [name])) === 1);
    },

    skipScheduleSlots(jobId, expectedNextFireAt, nextFireAt) {
      return s.tx((db) => moveScheduleCursor(s, db, { jobId, expectedNextFireAt, nextFireAt }));
    },

    pauseScheduleJob(name, reason) {
      return s.tx(async (db) => {
        const row = await first<ScheduleJobRow>(db, pgSql(sql.PAUSE_JOB), [reason, s.now(), name]);
        return row ? toScheduleJob(row) : null;
      });
    },

    resumeScheduleJob(name, nextFireAt) {
      return s.tx(async (db) => {
        const row = await first<ScheduleJobRow>(db, pgSql(sql.RESUME_JOB), [
          nextFireAt,
          s.now(),
          name,
        ]);
        return row ? toScheduleJob(row) : null;
      });
    },

    recordScheduleRun(name, ok, pauseAfter) {
      return s.tx(async (db) => {
        const row = await first<ScheduleJobRow>(
          db,
          "SELECT * FROM schedule_jobs WHERE name = $1 FOR UPDATE",
          [name],
        );
        if (!row) return null;
        const { pausedNow, params } = sql.runOutcome(row, ok, pauseAfter, s.now());
        const updated = await first<ScheduleJobRow>(db, pgSql(sql.RECORD_RUN), params);
        return { job: toScheduleJob(updated!), pausedNow };
      });
    },
  };
}
