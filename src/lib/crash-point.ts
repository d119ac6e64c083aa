/**
 * Named crash points for the crash-safety harness: when KEEL_CRASH_POINT names a point (optionally
 * `name:N` for its N-th hit), reaching it kills the process with SIGKILL, exactly as a power cut
 * or the OOM killer would. Without the setting every call is a no-op.
 */
export type CrashPoint = (name: CrashPointName) => void;

export const CRASH_POINTS = [
  "after_inbox_commit",
  "after_turn_start",
  "after_model_call",
  "after_tool_started",
  "after_tool_ran",
  "after_tool_finished",
  "mid_compaction",
  "after_compaction",
  "after_reply_queued",
  "after_reply_sent",
  "mid_recovery",
] as const;

/**
 * Points on the media path (a message's file downloaded or transcribed and recorded). The chaos
 * rig sends text only, so these are exercised by the media end-to-end tests instead.
 */
export const MEDIA_CRASH_POINTS = ["after_media_step"] as const;

/**
 * A task's child has finished (its turn's end is committed) and the task's end, with the
 * delivery of its result, is not yet (src/tasks): the end-to-end task tests crash here.
 */
export const TASK_CRASH_POINTS = ["before_task_end"] as const;

export type CrashPointName = (
  | typeof CRASH_POINTS
  | typeof MEDIA_CRASH_POINTS
  | typeof TASK_CRASH_POINTS
)[number];

export function createCrashPoint(spec: string | undefined): CrashPoint {
  if (!spec) return () => {};
  const [name, nth] = spec.split(":");
  let remaining = nth ? Math.max(1, Number.parseInt(nth, 10) || 1) : 1;
  return (point) => {
    if (point !== name) return;
    remaining -= 1;
    if (remaining === 0) process.kill(process.pid, "SIGKILL");
  };
}
