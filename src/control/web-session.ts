/**
 * The browser's session cookie `keel_session`, set by the login link (`/?token=<control token>`).
 *
 * Its value is `v1.<issued at, unix s>.<HMAC-SHA256 of that, keyed by the control token>`: never
 * the token itself, and nothing to keep in memory or on disk. So a cookie survives gateway
 * restarts (the chat page reconnects by itself after a `/restart`), expires after `http.session_ttl`, is
 * worthless against another gateway (other token, other key), and rotating the control token
 * logs every browser out. HttpOnly keeps it from any script; SameSite=Strict keeps browsers from
 * sending it with requests another site starts.
 */
import { createHmac } from "node:crypto";
import { secretsEqual } from "./http-auth.js";

export const SESSION_COOKIE = "keel_session";
/** `http.session_ttl`'s default: 12 hours. */
export const DEFAULT_SESSION_TTL_S = 12 * 3600;
/** A cookie issued this far in the future (clock change) is still refused beyond it. */
const CLOCK_SKEW_S = 300;

export class WebSessions {
  /**
   * @param ttlS how long a cookie lasts (`http.session_ttl`): the browser's Max-Age, and the age
   *   beyond which this gateway refuses it whatever the browser sends.
   */
  constructor(
    private readonly controlToken: string,
    private readonly now: () => number = Date.now,
    private readonly ttlS: number = DEFAULT_SESSION_TTL_S,
  ) {}

  /** A fresh cookie value. */
  issue(): string {
    const issuedAt = Math.floor(this.now() / 1000);
    return `v1.${issuedAt}.${this.sign(issuedAt)}`;
  }

  /** True for a value this gateway issued within the last `ttlS` seconds. */
  verify(value: string): boolean {
    const match = /^v1\.(\d{1,12})\.([A-Za-z0-9_-]{43})$/.exec(value);
    if (!match) return false;
    const issuedAt = Number(match[1]);
    const nowS = this.now() / 1000;
    if (issuedAt > nowS + CLOCK_SKEW_S || nowS - issuedAt > this.ttlS) return false;
    return secretsEqual(match[2]!, this.sign(issuedAt));
  }

  /** The Set-Cookie header value for a fresh session. */
  setCookieHeader(): string {
    return `${SESSION_COOKIE}=${this.issue()}; Path=/; Max-Age=${this.ttlS}; HttpOnly; SameSite=Strict`;
  }

  private sign(issuedAt: number): string {
    return createHmac("sha256", this.controlToken)
      .update(`keel_session.v1.${issuedAt}`)
      .digest("base64url");
  }
}

/** The Set-Cookie header value that removes the cookie (a stale one must not be sent again). */
export const CLEAR_SESSION_COOKIE = `${SESSION_COOKIE}=; Path=/; Max-Age=0; HttpOnly; SameSite=Strict`;

/** The `keel_session` value of a Cookie header, or null. */
export function sessionCookieOf(cookieHeader: string | undefined): string | null {
  if (!cookieHeader) return null;
  for (const part of cookieHeader.split(";")) {
    const eq = part.indexOf("=");
    if (eq < 0) continue;
    if (part.slice(0, eq).trim() === SESSION_COOKIE) return part.slice(eq + 1).trim() || null;
  }
  return null;
}
