/**
 * The HTTP error catalogue of the gateway's own routes (code → status → message, listed in
 * docs/http-errors.md) and the one place that renders an error as a response. Checks throw;
 * route handlers keep only the success path. The `/v1` API renders OpenAI's shape instead
 * (`OpenAiError`, src/platforms/openai-api/errors.ts).
 */
import type { Context } from "hono";
import type { Logger } from "pino";
import { GatewayError, OpenAiError } from "../lib/errors.js";

/** A message here is the default; a check may give a more precise one. */
export const HTTP_ERRORS = {
  BAD_REQUEST: { status: 400, message: "The request is not valid." },
  BAD_JSON: { status: 400, message: "Request body is not valid JSON." },
  UNAUTHORIZED: {
    status: 401,
    message:
      "Missing or wrong credential: send Authorization: Bearer <control token>, or open the login link (`keel open`).",
  },
  CROSS_SITE_REFUSED: { status: 403, message: "Cross-site requests are refused." },
  NOT_FOUND: { status: 404, message: "Not found." },
  APPROVAL_ANSWERED: { status: 409, message: "This approval was already answered." },
  BODY_TOO_LARGE: { status: 413, message: "Request body is too large." },
  HOST_REFUSED: { status: 421, message: "Unrecognized Host header." },
  RATE_LIMITED: { status: 429, message: "Too many failed authentication attempts." },
  INTERNAL: { status: 500, message: "Internal error." },
  STORE_UNAVAILABLE: {
    status: 503,
    message:
      "The store does not answer; the gateway keeps running and recovers by itself once it does.",
  },
} as const satisfies Record<string, { status: number; message: string }>;

export type HttpErrorCode = keyof typeof HTTP_ERRORS;

/** The error for `code`, to throw from a check. */
export function httpError(
  code: HttpErrorCode,
  message: string = HTTP_ERRORS[code].message,
  headers?: Record<string, string>,
): GatewayError {
  return new GatewayError(code, message, HTTP_ERRORS[code].status, headers && { headers });
}

/**
 * The response for a thrown error: OpenAI's shape for an `OpenAiError` and for any error on a
 * `/v1` path (stock OpenAI clients parse only that shape, whichever check refused the request:
 * the body limit, the Host check, a route that does not exist), `{ error: { code, message } }`
 * for any other GatewayError, and a logged 500 that tells nothing for the rest.
 */
export function renderHttpError(c: Context, err: unknown, logger: Logger): Response {
  if (!(err instanceof GatewayError)) {
    logger.error({ err, path: c.req.path }, "request failed");
    return renderHttpError(c, httpError("INTERNAL"), logger);
  }
  for (const [name, value] of Object.entries(err.headers)) c.header(name, value);
  const status = err.status as 400;
  if (err instanceof OpenAiError) return c.json(err.body(), status);
  if (isApiPath(c.req.path)) return c.json(asOpenAiError(err).body(), status);
  return c.json({ error: { code: err.code, message: err.message } }, status);
}

/** The `/v1` API's paths, whose every answer is in OpenAI's shape. */
export function isApiPath(path: string): boolean {
  return path === "/v1" || path.startsWith("/v1/");
}

/** A gateway error told in OpenAI's words: its code lower-cased, the type OpenAI gives the status. */
export function asOpenAiError(err: GatewayError): OpenAiError {
  const type =
    err.status === 429
      ? "rate_limit_error"
      : err.status >= 500
        ? "server_error"
        : "invalid_request_error";
  return new OpenAiError(type, err.code.toLowerCase(), err.message, err.status);
}
