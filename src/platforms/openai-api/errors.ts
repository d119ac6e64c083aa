/**
 * The `/v1` API's request errors in OpenAI's shape (code → status → type → message, listed in
 * docs/http-errors.md), and the sub-app's error handler: checks throw these, the turn's endings
 * throw theirs (outcomes.ts), and `renderApiError` turns anything else into an OpenAI-shaped 500.
 */
import type { Context } from "hono";
import type { Logger } from "pino";
import { asOpenAiError, renderHttpError } from "../../control/http-errors.js";
import { GatewayError, OpenAiError } from "../../lib/errors.js";
import type { HttpFailure } from "./outcomes.js";

export const API_ERRORS = {
  missing_api_key: {
    status: 401,
    type: "invalid_request_error",
    code: "invalid_api_key",
    message: "Missing API key.",
  },
  model_not_found: {
    status: 404,
    type: "invalid_request_error",
    code: "model_not_found",
    message: "Unknown model.",
  },
  previous_response_not_found: {
    status: 404,
    type: "invalid_request_error",
    code: "previous_response_not_found",
    message: "Unknown previous response.",
  },
  unknown_route: {
    status: 404,
    type: "invalid_request_error",
    code: "not_found",
    message: "No such route.",
  },
  method_not_allowed: {
    status: 405,
    type: "invalid_request_error",
    code: "method_not_allowed",
    message: "Method not allowed.",
  },
  session_not_found: {
    status: 404,
    type: "invalid_request_error",
    code: "session_not_found",
    message: "Unknown session id.",
  },
  unsupported_media_type: {
    status: 415,
    type: "invalid_request_error",
    code: null,
    message: "Content-Type must be application/json.",
  },
  bad_json: {
    status: 400,
    type: "invalid_request_error",
    code: null,
    message: "Request body is not valid JSON.",
  },
  invalid_request: {
    status: 400,
    type: "invalid_request_error",
    code: null,
    message: "Invalid request.",
  },
  not_accepting: {
    status: 503,
    type: "server_error",
    code: null,
    message: "The gateway is not accepting requests right now.",
  },
  not_stored: {
    status: 503,
    type: "server_error",
    code: null,
    message: "The message could not be stored; nothing was accepted. Try again.",
  },
  internal: { status: 500, type: "server_error", code: null, message: "Internal error." },
} as const satisfies Record<
  string,
  { status: number; type: string; code: string | null; message: string }
>;

export type ApiErrorName = keyof typeof API_ERRORS;

/** The error for `name`, to throw from a check. */
export function apiError(name: ApiErrorName, message?: string, param?: string): OpenAiError {
  const { status, type, code } = API_ERRORS[name];
  const text = message ?? API_ERRORS[name].message;
  return new OpenAiError(type, code, text, status, param === undefined ? undefined : { param });
}

/** A turn's ending that is not a reply (outcomes.ts), as an error to throw. */
export function failureError(failure: HttpFailure): OpenAiError {
  const { message, type, code } = failure.body.error;
  return new OpenAiError(type, code, message, failure.status, {
    ...(failure.retryAfter !== null && { headers: { "Retry-After": String(failure.retryAfter) } }),
  });
}

/** The `/v1` sub-app's error handler: every error leaves in OpenAI's shape. */
export function renderApiError(c: Context, err: unknown, logger: Logger): Response {
  if (err instanceof OpenAiError) return renderHttpError(c, err, logger);
  if (err instanceof GatewayError && err.status < 500) {
    return renderHttpError(c, asOpenAiError(err), logger);
  }
  logger.error({ err, path: c.req.path }, "api request failed");
  return renderHttpError(c, apiError("internal"), logger);
}
