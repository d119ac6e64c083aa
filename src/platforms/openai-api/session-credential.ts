/**
 * Whose a `/v1` session is: each session records the credential it was created under, and only
 * that credential, or an operator, may continue it (docs/security.md, "Whose session it is").
 */
import { createHash } from "node:crypto";
import type { Granted } from "../../control/access.js";
import { bearerToken } from "../../control/http-auth.js";

/**
 * What a session records as the credential it was created under: the kind of credential, and for
 * `platforms.api.key` a hash of the key (domain-separated, so it equals no other hash of it), so
 * rotating the key also closes the old key's sessions. Never the secret itself.
 */
export function sessionCredential(granted: Granted, authorization: string | undefined): string {
  if (granted.credential !== "api_key") return granted.credential;
  const token = bearerToken(authorization) ?? "";
  return `api_key:${sha256(`keel session credential\0${token}`).slice(0, 32)}`;
}

/**
 * Whether a request let in with `granted` (its `credential` as {@link sessionCredential} gives
 * it) may continue, or read, a session that recorded `recorded`: the same credential, or an
 * operator (the control token, docs/security.md). A session with none recorded (older than the
 * record) is the operators' only.
 */
export function maySeeSession(
  granted: Granted,
  credential: string,
  recorded: string | null,
): boolean {
  return granted.operator || (recorded !== null && recorded === credential);
}

function sha256(text: string): string {
  return createHash("sha256").update(text).digest("hex");
}
