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

/**
 * Notice on the next message of a session suspended without the dropped-request notice (a
 * suspension recorded before that notice existed).
 */
export const SUSPENDED_NOTICE =
  "◐ Your previous session was cut off by several restarts in a row, so this is a fresh conversation.";

/** A user's request as a notice names it: one line, at most 80 characters, in quotes. */
export function quoteRequest(text: string | null): string {
  const line = (text ?? "").replace(/\s+/g, " ").trim();
  if (line === "") return "your last request";
  return `“${line.length > 80 ? `${line.slice(0, 79)}…` : line}”`;
}

/**
 * Sent once to each chat whose interrupted request the restart-loop breaker holds back; it
 * answers the interrupted message where the platform allows.
 */
export function heldBackNotice(request: string | null, windowSeconds: number): string {
  return (
    `⏸ The gateway restarted several times in a short while, so ${quoteRequest(request)} is on ` +
    `hold: it continues by itself once the gateway has been stable for ${windowSeconds} s. ` +
    "Send /retry to continue it now."
  );
}

/** Sent when a session is suspended after three cut-offs in a row: names the dropped request. */
export function droppedRequestNotice(request: string | null): string {
  return (
    `◐ ${capitalize(quoteRequest(request))} was cut off by several restarts in a row, so it was ` +
    "dropped and your next message starts a fresh conversation. Send /retry to run it again on " +
    "a fresh start."
  );
}

function capitalize(text: string): string {
  return text.charAt(0).toUpperCase() + text.slice(1);
}

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
