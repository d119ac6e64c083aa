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
import { ScheduleNameTakenError } from "../store.js";
import { type ScheduleJobRow, toScheduleJob } from "../store-rows.js";
import * as sql from "./statements.js";

function scheduleRow(s: SqliteContext, name: string): ScheduleJobRow | undefined {
  return s.stmt(sql.SELECT_JOB).get(name) as ScheduleJobRow | undefined;
}

export function sqliteSchedules(s: SqliteContext): ScheduleStore {
  return {
    createScheduleJob(input) {
      return s.tx(() => {
        const row = s.stmt(sql.INSERT_JOB).get(...sql.jobParams(input, s.now())) as
          | ScheduleJobRow
          | undefined;
        if (!row) throw new ScheduleNameTakenError(input.name);
        // A name used before (a deleted job, a one-shot that ran) left its session behind: the new
        // job, perhaps another chat's, starts a fresh transcript instead of inheriting that one.
        if (sessionRow(s, input.sessionKey)) resetSessionSync(s, input.sessionKey);
        return toScheduleJob(row);
      });
    },

    listScheduleJobs() {
      return s.read(() => (s.stmt(sql.LIST_JOBS).all() as ScheduleJobRow[]).map(toScheduleJob));
    },

    getScheduleJob(name) {
      return s.read(() => {
        const row = scheduleRow(s, name);
        return row ? toScheduleJob(row) : null;
      });
    },

    deleteScheduleJob(name) {
      return s.tx(() => s.stmt(sql.DELETE_JOB).run(name).changes === 1);
    },

    skipScheduleSlots(jobId, expectedNextFireAt, nextFireAt) {
      return s.tx(() => moveScheduleCursor(s, { jobId, expectedNextFireAt, nextFireAt }));
    },

    pauseScheduleJob(name, reason) {
      return s.tx(() => {
        const row = s.stmt(sql.PAUSE_JOB).get(reason, s.now(), name) as ScheduleJobRow | undefined;
        return row ? toScheduleJob(row) : null;
      });
    },

    resumeScheduleJob(name, nextFireAt) {
      return s.tx(() => {
        const row = s.stmt(sql.RESUME_JOB).get(nextFireAt, s.now(), name) as
          | ScheduleJobRow
          | undefined;
        return row ? toScheduleJob(row) : null;
      });
    },

    recordScheduleRun(name, ok, pauseAfter) {
      return s.tx(() => {
        const row = scheduleRow(s, name);
        if (!row) return null;
        const { pausedNow, params } = sql.runOutcome(row, ok, pauseAfter, s.now());
        const updated = s.stmt(sql.RECORD_RUN).get(...params) as ScheduleJobRow;
        return { job: toScheduleJob(updated), pausedNow };
      });
    },
  };
}
