/**
 * TaskStore (tasks) on Postgres; what each method promises is in roles.ts.
 * Writes run in one transaction each (`s.tx`), reads in one snapshot (`s.read`).
 */
import { all, changes, type Db, first, insertOutbox, type PgContext, pgSql } from "../pg-shared.js";
import type { TaskStore } from "../roles.js";
import type { ChildTurn, TaskEnd, TaskInput, TaskRecord, TurnState } from "../store.js";
import * as taskRows from "./rows.js";

async function get(db: Db, id: number): Promise<TaskRecord | null> {
  const row = await first<taskRows.TaskRow>(db, "SELECT * FROM tasks WHERE id = $1", [id]);
  return row ? taskRows.toTask(row) : null;
}

export function pgTasks(s: PgContext): TaskStore {
  return {
    createTask(input: TaskInput) {
      return s.tx(async (db) => {
        if (input.parentToolCallId !== null) {
          // Two gateways re-running the same call wait for each other here.
          await db.query("SELECT pg_advisory_xact_lock(hashtext($1))", [
            `task:${input.parentSessionId}:${input.parentToolCallId}`,
          ]);
          const row = await first<taskRows.TaskRow>(
            db,
            "SELECT * FROM tasks WHERE parent_session_id = $1 AND parent_tool_call_id = $2",
            [input.parentSessionId, input.parentToolCallId],
          );
          if (row) return { task: taskRows.toTask(row), created: false };
        }
        const params = taskRows.taskParams(input, s.now());
        const inserted = await first<{ id: number | string }>(
          db,
          pgSql(taskRows.INSERT_TASK),
          params,
        );
        const id = Number(inserted!.id);
        await db.query(pgSql(taskRows.SET_CHILD_KEY), [taskRows.taskChildKey(id), id]);
        return { task: (await get(db, id))!, created: true };
      });
    },

    getTask(id: number) {
      return s.read((db) => get(db, id));
    },

    listTasks(filter = {}) {
      return s.read(async (db) => {
        const where: string[] = [];
        const params: unknown[] = [];
        const p = (v: unknown) => {
          params.push(v);
          return `$${params.length}`;
        };
        if (filter.chat) {
          where.push(
            `chat_platform = ${p(filter.chat.platform)} AND chat_id = ${p(filter.chat.chatId)}`,
          );
        }
        if (filter.states?.length) where.push(`state = ANY(${p(filter.states)})`);
        if (filter.parentSessionKey !== undefined) {
          where.push(`parent_session_key = ${p(filter.parentSessionKey)}`);
        }
        const sql = `SELECT * FROM tasks ${where.length ? `WHERE ${where.join(" AND ")}` : ""}
          ORDER BY id ${filter.limit ? `DESC LIMIT ${Math.floor(filter.limit)}` : ""}`;
        const rows = (await all<taskRows.TaskRow>(db, sql, params)).map(taskRows.toTask);
        return filter.limit ? rows.reverse() : rows;
      });
    },

    startTask(id: number) {
      return s.tx(
        async (db) =>
          (await changes(
            db,
            "UPDATE tasks SET state = 'running', started_at = $1 WHERE id = $2 AND state = 'queued'",
            [s.now(), id],
          )) > 0,
      );
    },

    endTask(end: TaskEnd) {
      return s.tx(async (db) => {
        const params = [end.state, end.result, s.now(), end.id];
        if ((await changes(db, pgSql(taskRows.END_TASK), params)) === 0) return null;
        const task = (await get(db, end.id))!;
        const notice = taskRows.taskNoticeRow(end, task);
        if (notice) await insertOutbox(s, db, notice);
        return task;
      });
    },

    detachTask(id: number) {
      return s.tx(async (db) => {
        await db.query(
          `UPDATE tasks SET background = TRUE
           WHERE id = $1 AND NOT background AND state IN ('queued', 'running')`,
          [id],
        );
        return get(db, id);
      });
    },

    listTaskNotes(parentSessionKey: string) {
      return s.read(async (db) =>
        (
          await all<taskRows.TaskRow>(
            db,
            `SELECT * FROM tasks WHERE parent_session_key = $1 AND NOT noted AND background
             AND state NOT IN ('queued', 'running') ORDER BY id`,
            [parentSessionKey],
          )
        ).map(taskRows.toTask),
      );
    },

    markTasksNoted(ids: number[]) {
      return s.tx(async (db) => {
        await db.query("UPDATE tasks SET noted = TRUE WHERE id = ANY($1)", [ids]);
      });
    },

    childTurn(childKey: string) {
      return s.read(async (db): Promise<ChildTurn | null> => {
        const turn = await first<{ state: TurnState; session_id: string }>(
          db,
          "SELECT state, session_id FROM turns WHERE session_key = $1 ORDER BY id DESC LIMIT 1",
          [childKey],
        );
        if (!turn) return null;
        const last = await first<{ body: string }>(
          db,
          "SELECT body FROM messages WHERE session_id = $1 ORDER BY seq DESC LIMIT 1",
          [turn.session_id],
        );
        return { state: turn.state, answer: taskRows.finalAnswer(last?.body) };
      });
    },
  };
}
