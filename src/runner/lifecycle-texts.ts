/**
 * What users read about restarts and stops. The notice texts are fixed by the lifecycle
 * contract; keep them byte-for-byte.
 */

/** Sent to each chat with a running turn when a restart cuts it off. */
export const RESTART_NOTICE =
  "⚠️ Gateway restarting — your current task was interrupted. Send any message after restart to resume where it left off.";

/** The restart notice when the interrupted turn will continue by itself after the restart. */
export const RESTART_NOTICE_AUTO_RESUME =
  "⚠️ Gateway restarting — your current task was interrupted. It will resume by itself once the gateway is back.";

/** Sent to each chat with a running turn when a stop cuts it off. */
export const STOP_NOTICE = "⚠️ Gateway shutting down — your current task was interrupted.";

/** Sent after coming back to the chat that asked for `/restart`. */
export const RESTARTED_NOTICE = "♻ Gateway restarted successfully. Your session continues.";

/** Sent to home channels after a restart that was not asked from a chat. */
export const ONLINE_NOTICE = "♻️ Gateway online — Keel is back and ready.";

/** Reply to a new turn refused during an external (maintenance) drain. */
export const DRAIN_REFUSAL =
  "⏳ Keel is draining for maintenance and is not starting new turns right now. Please resend shortly.";

/** Notice for a session suspended after being cut off by several restarts in a row. */
export const SUSPENDED_NOTICE =
  "◐ Your previous session was cut off by several restarts in a row, so this is a fresh conversation.";

/** `/restart` reply while turns run (also for a repeated `/restart`). */
export function drainingBeforeRestartText(activeTurns: number): string {
  return `⏳ Draining ${activeTurns} active agent(s) before restart...`;
}

export const RESTART_ALREADY_IN_PROGRESS = "⏳ Gateway restart already in progress...";
export const RESTARTING_NOW =
  "♻ Restarting the gateway now. If it is not back within a minute, run `keel gateway restart` on the host.";

/** Reply to a message for an idle session while stopping. */
export function notAcceptingText(restart: boolean): string {
  return `⏳ Gateway is ${restart ? "restarting" : "shutting down"} and is not accepting new work right now.`;
}

/** Reply to a queued follow-up for a busy session while stopping (queue mode). */
export function queuedForAfterRestartText(restart: boolean): string {
  return `⏳ Gateway ${restart ? "restarting" : "shutting down"} — queued for the next turn after it comes back.`;
}

/**
 * The reply to `/restart`: draining count when turns run, "already in progress" for a repeat
 * on an idle gateway, else the plain acknowledgement.
 */
export function restartCommandReply(input: {
  alreadyRequested: boolean;
  activeTurns: number;
}): string {
  if (input.activeTurns > 0) return drainingBeforeRestartText(input.activeTurns);
  return input.alreadyRequested ? RESTART_ALREADY_IN_PROGRESS : RESTARTING_NOW;
}
