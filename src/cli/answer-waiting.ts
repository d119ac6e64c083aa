/**
 * An operator's answer from the terminal to a turn that waits (an approval, a budget pause):
 * through the running gateway's control API, so the turn goes on at once; when no gateway
 * answers, written to the store for its next start.
 */
import type { Config } from "../config/schema.js";
import { callControlApi, liveGateway } from "./gateway-probe.js";
import type { CliIo } from "./io.js";
import { type GlobalOptions, loadForCommand } from "./load.js";

/** An answer written to the store. */
export interface StoredAnswer {
  /** False when the question had been answered already. */
  changed: boolean;
  /** Reported as the control API's body would be. */
  body: unknown;
  /** A line for standard error after the report. */
  detail?: string;
}

export interface AnswerWays {
  /** Prints what an HTTP status (and body) of `POST /api/approvals/:id` means; the exit code. */
  report(status: number, body: unknown): number;
  /** Writes the answer to the store; null when no question has the id. */
  store(config: Config): Promise<StoredAnswer | null>;
}

export async function answerWaiting(
  id: string,
  decision: string,
  options: GlobalOptions,
  io: CliIo,
  ways: AnswerWays,
): Promise<number> {
  const loaded = loadForCommand(options, io);
  if (!loaded.ok) return loaded.code;
  const { config } = loaded.loaded;
  if ((await liveGateway(config.home)) !== null) {
    const answer = await callControlApi(config, `/api/approvals/${encodeURIComponent(id)}`, {
      method: "POST",
      body: { decision },
    });
    if (answer !== null) return ways.report(answer.status, answer.body);
  }
  const stored = await ways.store(config);
  if (!stored) return ways.report(404, null);
  const code = ways.report(stored.changed ? 200 : 409, stored.body);
  if (stored.changed) io.out("The gateway is not running: its next start continues the turn.");
  if (stored.detail !== undefined) io.err(stored.detail);
  return code;
}
