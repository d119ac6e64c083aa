/**
 * `Idempotency-Key` on `POST /v1/chat/completions`: a key is scoped to the credential that sent
 * it (a hash of the bearer value, never the secret itself), kept 24 h, and bound to a canonical
 * hash of the request, so a retry of the same request is recognised and a reuse for another one
 * is not mistaken for it.
 */
import { createHash } from "node:crypto";
import type { IdempotencyClaim } from "../../contract/platform.js";
import { bearerToken } from "../../control/http-auth.js";

export const IDEMPOTENCY_TTL_MS = 24 * 60 * 60 * 1000;
export const MAX_IDEMPOTENCY_KEY_LENGTH = 255;

/** Fields that say how to deliver the reply, not what is asked: a retry may change them. */
const DELIVERY_FIELDS = new Set(["stream", "stream_options"]);

/**
 * The scope of a client's keys: a hash of its bearer value (every caller without one, e.g. a
 * trusted loopback client, shares one scope). The prefix keeps it from equalling any other
 * hash of the same secret.
 */
export function credentialScope(authorization: string | undefined): string {
  const token = bearerToken(authorization) ?? "";
  return sha256(`keel idempotency scope\0${token}`);
}

/**
 * What makes two requests "the same": the body with its keys sorted (delivery fields left out)
 * and the session it continues, if any.
 */
export function requestHash(body: unknown, sessionId: string | undefined): string {
  const request =
    body !== null && typeof body === "object" && !Array.isArray(body)
      ? Object.fromEntries(Object.entries(body).filter(([k]) => !DELIVERY_FIELDS.has(k)))
      : body;
  return sha256(canonicalJson({ session: sessionId ?? null, request }));
}

/** The completion id every answer to one key carries (the first response and its repeats). */
export function completionIdFor(claim: Pick<IdempotencyClaim, "scope" | "key">): string {
  return `chatcmpl-${sha256(`${claim.scope}\0${claim.key}`).slice(0, 32)}`;
}

/** JSON with object keys sorted at every level. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  if (value !== null && typeof value === "object") {
    const entries = Object.entries(value)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(",")}}`;
  }
  return JSON.stringify(value) ?? "null";
}

function sha256(text: string): string {
  return createHash("sha256").update(text).digest("hex");
}
