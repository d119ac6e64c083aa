/**
 * TaskStore (tasks) on SQLite; what each method promises is in roles.ts.
 * Writes run in the group commit (`s.tx`), reads through `s.read`.
 */
import type { TaskStore } from "../roles.js";
import { insertOutbox, type SqliteContext } from "../sqlite-shared.js";
import type { ChildTurn, TaskEnd, TaskInput, TaskRecord, TurnState } from "../store.js";
import * as taskRows from "./rows.js";

export function sqliteTasks(s: SqliteContext): TaskStore {
  const get = (id: number): TaskRecord | null => {
    const row = s.stmt("SELECT * FROM tasks WHERE id = ?").get(id) as taskRows.TaskRow | undefined;
    return row ? taskRows.toTask(row) : null;
  };
  return {
    createTask(input: TaskInput) {
      return s.tx(() => {
        if (input.parentToolCallId !== null) {
          const row = s
            .stmt("SELECT * FROM tasks WHERE parent_session_id = ? AND parent_tool_call_id = ?")
            .get(input.parentSessionId, input.parentToolCallId) as taskRows.TaskRow | undefined;
          if (row) return { task: taskRows.toTask(row), created: false };
        }
        const params = taskRows.taskParams(input, s.now());
        const { id } = s.stmt(taskRows.INSERT_TASK).get(...params) as { id: number };
        s.stmt(taskRows.SET_CHILD_KEY).run(taskRows.taskChildKey(id), id);
        return { task: get(id)!, created: true };
      });
    },

    getTask(id: number) {
      return s.read(() => get(id));
    },

    listTasks(filter = {}) {
      return s.read(() => {
        const where: string[] = [];
        const params: unknown[] = [];
        if (filter.chat) {
          where.push("chat_platform = ? AND chat_id = ?");
          params.push(filter.chat.platform, filter.chat.chatId);
        }
        if (filter.states?.length) {
          where.push(`state IN (${filter.states.map(() => "?").join(", ")})`);
          params.push(...filter.states);
        }
        if (filter.parentSessionKey !== undefined) {
          where.push("parent_session_key = ?");
          params.push(filter.parentSessionKey);
        }
        const sql = `SELECT * FROM tasks ${where.length ? `WHERE ${where.join(" AND ")}` : ""}
          ORDER BY id ${filter.limit ? `DESC LIMIT ${Math.floor(filter.limit)}` : ""}`;
        const rows = (s.stmt(sql).all(...params) as taskRows.TaskRow[]).map(taskRows.toTask);
        return filter.limit ? rows.reverse() : rows;
      });
    },

    startTask(id: number) {
      return s.tx(() => {
        const { changes } = s
          .stmt(
            "UPDATE tasks SET state = 'running', started_at = ? WHERE id = ? AND state = 'queued'",
          )
          .run(s.now(), id);
        return changes > 0;
      });
    },

    endTask(end: TaskEnd) {
      return s.tx(() => {
        const ended = s.stmt(taskRows.END_TASK).run(end.state, end.result, s.now(), end.id);
        if (ended.changes === 0) return null;
        const task = get(end.id)!;
        const notice = taskRows.taskNoticeRow(end, task);
        if (notice) insertOutbox(s, notice);
        return task;
      });
    },

    detachTask(id: number) {
      return s.tx(() => {
        s.stmt(
          `UPDATE tasks SET background = 1
           WHERE id = ? AND background = 0 AND state IN ('queued', 'running')`,
        ).run(id);
        return get(id);
      });
    },

    listTaskNotes(parentSessionKey: string) {
      return s.read(() =>
        (
          s
            .stmt(
              `SELECT * FROM tasks WHERE parent_session_key = ? AND noted = 0 AND background = 1
               AND state NOT IN ('queued', 'running') ORDER BY id`,
            )
            .all(parentSessionKey) as taskRows.TaskRow[]
        ).map(taskRows.toTask),
      );
    },

    markTasksNoted(ids: number[]) {
      return s.tx(() => {
        for (const id of ids) s.stmt("UPDATE tasks SET noted = 1 WHERE id = ?").run(id);
      });
    },

    childTurn(childKey: string) {
      return s.read((): ChildTurn | null => {
        const turn = s
          .stmt(
            "SELECT state, session_id FROM turns WHERE session_key = ? ORDER BY id DESC LIMIT 1",
          )
          .get(childKey) as { state: TurnState; session_id: string } | undefined;
        if (!turn) return null;
        const last = s
          .stmt("SELECT body FROM messages WHERE session_id = ? ORDER BY seq DESC LIMIT 1")
          .get(turn.session_id) as { body: string } | undefined;
        return { state: turn.state, answer: taskRows.finalAnswer(last?.body) };
      });
    },
  };
}
