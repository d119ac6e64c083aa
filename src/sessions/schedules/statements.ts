/**
 * The schedule statements both engines run, written once with SQLite's `?` placeholders
 * (schedules/pg.ts converts them with pgSql), and the parameters they take.
 */
import type { ScheduleJobInput } from "../store.js";
import { flag, type ScheduleJobRow } from "../store-rows.js";

/** A new job; no row back when the name is taken. */
export const INSERT_JOB = `INSERT INTO schedule_jobs (name, kind, expr, tz, prompt, session_key, chat,
    misfire, next_fire_at, created_by, created_at, updated_at)
  VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
  ON CONFLICT (name) DO NOTHING RETURNING *`;

export function jobParams(input: ScheduleJobInput, now: number): unknown[] {
  const { name, kind, expr, tz, prompt, sessionKey, misfire, nextFireAt, createdBy } = input;
  const chat = input.chat ? JSON.stringify(input.chat) : null;
  return [name, kind, expr, tz, prompt, sessionKey, chat, misfire, nextFireAt, createdBy, now, now];
}

export const SELECT_JOB = "SELECT * FROM schedule_jobs WHERE name = ?";

export const LIST_JOBS = "SELECT * FROM schedule_jobs ORDER BY name";

export const DELETE_JOB = "DELETE FROM schedule_jobs WHERE name = ?";

export const PAUSE_JOB = `UPDATE schedule_jobs SET paused = TRUE, paused_reason = ?, updated_at = ?
  WHERE name = ? RETURNING *`;

export const RESUME_JOB = `UPDATE schedule_jobs SET paused = FALSE, paused_reason = NULL,
    failures = 0, next_fire_at = ?, updated_at = ?
  WHERE name = ? RETURNING *`;

export const RECORD_RUN = `UPDATE schedule_jobs SET failures = ?, paused = ?, paused_reason = ?,
    updated_at = ?
  WHERE id = ? RETURNING *`;

/**
 * A run's outcome for RECORD_RUN: a success clears the failures; the `pauseAfter`th failure in a
 * row pauses the job (`pausedNow`), with the count as its reason.
 */
export function runOutcome(row: ScheduleJobRow, ok: boolean, pauseAfter: number, now: number) {
  const failures = ok ? 0 : row.failures + 1;
  const pausedNow = !ok && !flag(row.paused) && failures >= pauseAfter;
  const paused = pausedNow || flag(row.paused) ? 1 : 0;
  const reason = pausedNow ? `${failures} failed runs in a row` : row.paused_reason;
  return { pausedNow, params: [failures, paused, reason, now, row.id] };
}
