/**
 * The HTTP side of access: a middleware in front of every route that lets through only what
 * Access grants (default deny: a route added later is protected without doing anything), the
 * login link `GET /?token=<control token>`, and the answers to refused requests.
 */
import type { IncomingMessage } from "node:http";
import type { HttpBindings } from "@hono/node-server";
import type { Context, MiddlewareHandler } from "hono";
import { OpenAiError } from "../lib/errors.js";
import type { Access, AccessDecision, AccessKind, Granted, RequestFacts } from "./access.js";
import { httpError } from "./http-errors.js";
import { CLEAR_SESSION_COOKIE } from "./web-session.js";

/**
 * Routes anyone may call: liveness and readiness probes, and platform webhooks, which carry
 * their own proof (the WhatsApp route checks Meta's signature on every POST).
 */
const PUBLIC_PATHS = new Set(["/healthz", "/readyz", "/platforms/whatsapp/webhook"]);
/** Pages a person opens: without a session they get the login hint instead of JSON. */
const PAGES = new Set(["/", "/dashboard"]);

export function accessKindOf(path: string): AccessKind | "public" {
  if (PUBLIC_PATHS.has(path)) return "public";
  if (path === "/v1" || path.startsWith("/v1/")) return "api";
  if (path === "/metrics") return "metrics";
  return "web";
}

export function requestFacts(req: IncomingMessage, protocolToken?: string | null): RequestFacts {
  const h = req.headers;
  const one = (v: string | string[] | undefined) => (Array.isArray(v) ? v[0] : v);
  return {
    address: req.socket.remoteAddress,
    authorization: one(h.authorization),
    cookie: one(h.cookie),
    protocolToken: protocolToken ?? null,
    origin: one(h.origin),
    host: one(h.host),
    secFetchSite: one(h["sec-fetch-site"]),
    secFetchMode: one(h["sec-fetch-mode"]),
  };
}

/** `access`: what the request was let in with (unset on the public probes). */
export type AppEnv = { Bindings: HttpBindings; Variables: { access?: Granted } };

/**
 * Headers for any answer to a URL with a `token` parameter (the login link, right or wrong, or a
 * token pasted onto another page): no cache keeps it, and no Referer carries the URL onward.
 */
const TOKEN_URL_HEADERS = { "cache-control": "no-store", "referrer-policy": "no-referrer" };

export function createAccessGate(access: Access): MiddlewareHandler<AppEnv> {
  const gate = decide(access);
  return async (c, next) => {
    // Set ahead too, so that a refusal (thrown, rendered later) carries them as well.
    if (c.req.query("token") !== undefined) {
      for (const [name, value] of Object.entries(TOKEN_URL_HEADERS)) c.header(name, value);
    }
    const answer = await gate(c, next);
    if (c.req.query("token") === undefined) return answer;
    // The gate answers itself (a Response) or lets the route answer (then it is in c.res).
    const headers = (answer instanceof Response ? answer : c.res).headers;
    for (const [name, value] of Object.entries(TOKEN_URL_HEADERS)) headers.set(name, value);
    return answer;
  };
}

/** The gate proper: public probes, the login link, or Access's decision for the route's kind. */
function decide(access: Access): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const path = c.req.path;
    const kind = accessKindOf(path);
    if (kind === "public") return next();
    const facts = requestFacts(c.env.incoming);
    const loginToken = path === "/" && c.req.method === "GET" ? c.req.query("token") : undefined;
    if (loginToken !== undefined) return login(c, access, facts, loginToken);
    const decision = await access.check(facts, kind);
    if (decision.ok) {
      c.set("access", decision.granted);
      return next();
    }
    return refuse(c, decision, kind, PAGES.has(path) && c.req.method === "GET");
  };
}

/** The login link: a right token sets the session cookie and leads to `/` without the token. */
async function login(
  c: Context<AppEnv>,
  access: Access,
  facts: RequestFacts,
  token: string,
): Promise<Response> {
  const decision = await access.check(
    { ...facts, authorization: `Bearer ${token}`, cookie: undefined },
    "login",
  );
  if (!decision.ok) return refuse(c, decision, "web", true);
  const headers = { "set-cookie": access.sessions.setCookieHeader(), ...TOKEN_URL_HEADERS };
  // Opened from another site (e.g. `keel open`'s redirect file): a browser would not send a
  // SameSite=Strict cookie along a redirect that began there, so the page itself moves on.
  if (facts.secFetchSite === "cross-site") {
    return new Response(
      '<!doctype html><meta charset="utf-8"><meta http-equiv="refresh" content="0;url=/"><title>Keel</title><a href="/">Continue to Keel</a>',
      {
        status: 200,
        headers: {
          ...headers,
          "content-type": "text/html; charset=utf-8",
          "content-security-policy": "default-src 'none'; frame-ancestors 'none'",
        },
      },
    );
  }
  return new Response(null, { status: 303, headers: { ...headers, location: "/" } });
}

/** Throws the refusal (rendered by http-errors.ts), or answers a page request with the login page. */
function refuse(
  c: Context<AppEnv>,
  decision: AccessDecision & { ok: false },
  kind: AccessKind,
  page: boolean,
): Response {
  if (decision.status === 429) {
    const headers = { "retry-after": String(decision.retryAfterSeconds) };
    const message = `Too many failed authentication attempts; retry in ${decision.retryAfterSeconds} s.`;
    throw kind === "api"
      ? new OpenAiError("rate_limit_error", "rate_limited", message, 429, { headers })
      : httpError("RATE_LIMITED", message, headers);
  }
  const headers: Record<string, string> = { "www-authenticate": 'Bearer realm="keel"' };
  if (decision.staleCookie) headers["set-cookie"] = CLEAR_SESSION_COOKIE;
  if (kind === "api") {
    const message = decision.presented
      ? "Invalid API key (Authorization: Bearer <platforms.api.key or control token>)."
      : "Missing API key (Authorization: Bearer <platforms.api.key or control token>).";
    throw new OpenAiError("invalid_request_error", "invalid_api_key", message, 401, { headers });
  }
  if (page) {
    for (const [name, value] of Object.entries(headers)) c.header(name, value);
    return loginPage(c, decision.presented);
  }
  throw httpError("UNAUTHORIZED", undefined, headers);
}

/** A person opened a page without a session: tell them how to get one. Self-contained (no assets). */
function loginPage(c: Context<AppEnv>, wrongToken: boolean): Response {
  const detail = wrongToken
    ? "<p><strong>That login link is not valid for this gateway</strong> (its control token differs).</p>"
    : "";
  const html = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light dark"><title>Keel: log in</title><link rel="icon" href="data:,">
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:36rem;margin:4rem auto;padding:0 1rem}code{font-size:.95em}</style>
</head><body data-testid="login-required">
<h1>Keel: open the login link</h1>
${detail}<p>This gateway needs a credential. Open the login link it printed when it started, or run</p>
<pre><code>keel open</code></pre>
<p>on the machine running Keel: it prints the link (<code>http://…/?token=…</code>) and opens it in a browser
where one is available. The link sets a session cookie in this browser; the token is in
<code>control_token</code> in the Keel home folder, or in <code>KEEL_CONTROL_TOKEN</code>.</p>
</body></html>`;
  return c.html(html, 401, {
    "cache-control": "no-store",
    "content-security-policy":
      "default-src 'none'; style-src 'unsafe-inline'; img-src data:; frame-ancestors 'none'",
    "x-content-type-options": "nosniff",
  });
}
