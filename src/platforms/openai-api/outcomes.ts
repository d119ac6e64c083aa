/**
 * How a request ended, and how each ending is told to an HTTP client in OpenAI's error shape:
 * the runner reports what happened (a reply, a model error, a refusal, a turn cut off by a stop);
 * only this module knows statuses, codes and Retry-After.
 */

import type { ClientToolCall, Refusal, TurnUsage } from "../../contract/platform.js";
import type { InboxAnswer } from "../../sessions/store.js";
import { errorBody } from "./wire.js";

export type Completion =
  /** `toolCalls`: the turn stopped at calls to the client's functions, for it to run. */
  | { kind: "reply"; text: string; usage?: TurnUsage; toolCalls?: ClientToolCall[] }
  /** The model or the turn failed (502). */
  | { kind: "error"; text: string }
  /** Interrupted by the user or a newer message (409). */
  | { kind: "interrupted"; text: string }
  /** Not taken: no model, draining, stopping (503). */
  | { kind: "refused"; refusal: Refusal }
  /** Cut off by a gateway stop or restart; the turn continues after a restart (503). */
  | { kind: "cut_off" }
  /** A repeated request whose first answer the record does not keep (409). */
  | { kind: "unrecorded" };

export interface HttpFailure {
  status: 409 | 422 | 502 | 503;
  body: ReturnType<typeof errorBody>;
  /** Seconds for the Retry-After header, when waiting helps. */
  retryAfter: number | null;
}

/** Retry-After per refusal: a drain lasts for maintenance, a stop or restart a few seconds. */
const RETRY_AFTER_SECONDS: Record<Refusal, number | null> = {
  no_model: null,
  draining: 30,
  stopping: 10,
  restarting: 10,
};

const REFUSAL_CODE: Record<Refusal, string> = {
  no_model: "model_not_configured",
  draining: "gateway_draining",
  stopping: "gateway_stopping",
  restarting: "gateway_stopping",
};

const REFUSAL_MESSAGE: Record<Refusal, string> = {
  no_model:
    "No model is configured. Set model.base_url and model.name in $KEEL_HOME/config.yaml " +
    "(or OPENAI_BASE_URL and KEEL_MODEL) and restart Keel.",
  draining: "Keel is draining for maintenance and is not starting new turns. Retry later.",
  stopping: "The gateway is shutting down and is not accepting new work. Retry once it is back.",
  restarting: "The gateway is restarting and is not accepting new work. Retry in a few seconds.",
};

const CUT_OFF_MESSAGE =
  "The gateway is stopping or restarting and cut this request off. It is kept and continues " +
  "after a restart; retry with the same Idempotency-Key to get its reply.";

/** The HTTP failure for an ending that is not a reply; null for a reply. */
export function failureOf(done: Completion): HttpFailure | null {
  switch (done.kind) {
    case "reply":
      return null;
    case "error":
      return {
        status: 502,
        body: errorBody(done.text, "upstream_error", "model_error"),
        retryAfter: null,
      };
    case "interrupted":
      return {
        status: 409,
        body: errorBody(done.text || "The turn was interrupted.", "server_error", "interrupted"),
        retryAfter: null,
      };
    case "refused":
      return refusedFailure(done.refusal);
    case "cut_off":
      return {
        status: 503,
        body: errorBody(CUT_OFF_MESSAGE, "server_error", "gateway_stopping"),
        retryAfter: RETRY_AFTER_SECONDS.stopping,
      };
    case "unrecorded":
      return {
        status: 409,
        body: errorBody(
          "This Idempotency-Key was already used for this request, and its reply was not kept.",
          "invalid_request_error",
          "idempotency_reply_unavailable",
        ),
        retryAfter: null,
      };
  }
}

/** Work the runner does not take right now (503). */
export function refusedFailure(refusal: Refusal): HttpFailure {
  return {
    status: 503,
    body: errorBody(REFUSAL_MESSAGE[refusal], "server_error", REFUSAL_CODE[refusal]),
    retryAfter: RETRY_AFTER_SECONDS[refusal],
  };
}

/** The same key with a different request. */
export function keyReusedFailure(): HttpFailure {
  return {
    status: 422,
    body: errorBody(
      "This Idempotency-Key was already used for a different request; use a new key.",
      "invalid_request_error",
      "idempotency_key_reused",
    ),
    retryAfter: null,
  };
}

/** A closed inbox item's answer as the first request saw it (a notice answered as a reply). */
export function completionOfAnswer(answer: Exclude<InboxAnswer, { state: "open" }>): Completion {
  if (answer.state === "unrecorded") return { kind: "unrecorded" };
  switch (answer.outcome) {
    case "reply":
    case "notice":
      return { kind: "reply", text: answer.text };
    case "failed":
      return { kind: "error", text: answer.text };
    case "interrupted":
      return { kind: "interrupted", text: answer.text };
  }
}
