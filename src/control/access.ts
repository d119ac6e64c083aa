/**
 * Who may use a route (docs/security.md): the control token everywhere, `platforms.api.key` on
 * `/v1`, the browser session cookie on the web pages, `/api` and `/ws`, and nothing at all for
 * loopback peers only when `http.trust_loopback` asks for it. Every wrong credential counts as a
 * failure of its client address (AuthFailures): answered late, and with 429 once locked out.
 */
import { setTimeout as sleep } from "node:timers/promises";
import { isLoopback } from "../lib/net.js";
import type { AuthFailures } from "./auth-failures.js";
import { bearerToken, originNamesHost, secretsEqual } from "./http-auth.js";
import { sessionCookieOf, type WebSessions } from "./web-session.js";

/**
 * `api`: `/v1/*` (control token or API key). `web`: pages, assets, `/api/*`, `/ws` (control token
 * or session cookie). `login`: the login link, where only the control token counts. `metrics`:
 * `GET /metrics` (control token or `metrics.token`, the scraper's read-only credential).
 */
export type AccessKind = "api" | "web" | "login" | "metrics";

export type Credential =
  | "control_token"
  | "api_key"
  | "metrics_token"
  | "session_cookie"
  | "trusted_loopback";

/** What a request was let in with. Operators may use gateway-wide chat commands (`/restart`). */
export interface Granted {
  credential: Credential;
  operator: boolean;
}

export type AccessDecision =
  | { ok: true; granted: Granted }
  | { ok: false; status: 401; presented: boolean; staleCookie: boolean }
  | { ok: false; status: 429; retryAfterSeconds: number };

/** The parts of a request (HTTP or WebSocket upgrade) access depends on. */
export interface RequestFacts {
  address: string | undefined;
  authorization: string | undefined;
  cookie: string | undefined;
  /** The token of a `keel.token.<token>` WebSocket subprotocol, or null. */
  protocolToken?: string | null;
  origin: string | undefined;
  host: string | undefined;
  secFetchSite: string | undefined;
  secFetchMode: string | undefined;
}

export interface AccessOptions {
  controlToken: string;
  apiKey: string | undefined;
  /** `metrics.token`: opens `GET /metrics` and nothing else. */
  metricsToken?: string | undefined;
  trustLoopback: boolean;
  failures: AuthFailures;
  sessions: WebSessions;
}

export class Access {
  constructor(private readonly options: AccessOptions) {}

  get sessions(): WebSessions {
    return this.options.sessions;
  }

  /** Decides; a wrong credential is held back by the failure delay before the answer. */
  async check(facts: RequestFacts, kind: AccessKind): Promise<AccessDecision> {
    const { controlToken, apiKey, metricsToken, trustLoopback, failures, sessions } = this.options;
    if (kind !== "login" && trustLoopback && isLoopback(facts.address)) {
      return granted("trusted_loopback", true);
    }
    const bearer = bearerToken(facts.authorization) ?? facts.protocolToken ?? null;
    const cookie = kind === "web" && cookieUsable(facts) ? sessionCookieOf(facts.cookie) : null;
    // The two secrets Keel generates itself pass even while the address is locked out: they
    // cannot be guessed, and a local attacker must not lock the operator out.
    if (bearer !== null && secretsEqual(bearer, controlToken))
      return granted("control_token", true);
    if (cookie !== null && sessions.verify(cookie)) return granted("session_cookie", true);
    if (bearer === null && cookie === null) {
      return { ok: false, status: 401, presented: false, staleCookie: false };
    }
    const address = facts.address ?? "unknown";
    const locked = failures.lockedForSeconds(address);
    // While locked out the API key (chosen by a person, maybe weak) is not even compared.
    if (locked === 0 && kind === "api" && apiKey && bearer !== null && secretsEqual(bearer, apiKey))
      return granted("api_key", false);
    if (
      locked === 0 &&
      kind === "metrics" &&
      metricsToken &&
      bearer !== null &&
      secretsEqual(bearer, metricsToken)
    )
      return granted("metrics_token", false);
    const delayMs = failures.recordFailure(address);
    const retryAfterSeconds = failures.lockedForSeconds(address);
    if (retryAfterSeconds > 0) return { ok: false, status: 429, retryAfterSeconds };
    if (delayMs > 0) await sleep(delayMs);
    return { ok: false, status: 401, presented: true, staleCookie: cookie !== null };
  }
}

function granted(credential: Credential, operator: boolean): AccessDecision {
  return { ok: true, granted: { credential, operator } };
}

/**
 * The cookie counts only for requests the page itself makes (or the user navigating): a page of
 * another port on localhost is "same-site" and would otherwise have it sent along.
 */
function cookieUsable(facts: RequestFacts): boolean {
  if (facts.origin !== undefined && !originNamesHost(facts.origin, facts.host)) return false;
  const site = facts.secFetchSite;
  if (site === "cross-site" || site === "same-site") return facts.secFetchMode === "navigate";
  return true;
}
