/** Request checks shared by every route group: secrets, loopback peers, the Host header. */
import { createHash, timingSafeEqual } from "node:crypto";

/** Compares two secrets in constant time (hashing first so lengths leak nothing). */
export function secretsEqual(given: string, expected: string): boolean {
  const a = createHash("sha256").update(given).digest();
  const b = createHash("sha256").update(expected).digest();
  return timingSafeEqual(a, b);
}

/** The token of an `Authorization: Bearer <token>` header, or null. */
export function bearerToken(header: string | null | undefined): string | null {
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header ?? "");
  return match ? match[1]! : null;
}

/**
 * The Host header values this server answers to: the loopback names with the bound port (and
 * without one only on port 80, where browsers omit it), the `http.host` address itself when it
 * is a specific one, and the configured public names, all compared exactly. Anything else is a
 * DNS-rebinding attempt or a misdirected request: `127.evil.example`, `localhost.evil` and a
 * wrong port all fail.
 */
export function acceptedHostNames(input: {
  host: string;
  port: number;
  publicHosts: readonly string[];
}): Set<string> {
  const names = new Set<string>();
  const add = (name: string) => {
    names.add(`${name}:${input.port}`);
    if (input.port === 80) names.add(name);
  };
  for (const name of ["127.0.0.1", "localhost", "[::1]"]) add(name);
  const bound = input.host.toLowerCase();
  if (bound !== "0.0.0.0" && bound !== "::") add(bound.includes(":") ? `[${bound}]` : bound);
  for (const name of input.publicHosts) names.add(name.toLowerCase());
  return names;
}

/** True when the Host header is one of `accepted` (see {@link acceptedHostNames}). */
export function isAcceptedHost(hostHeader: string | undefined, accepted: Set<string>): boolean {
  return hostHeader !== undefined && accepted.has(hostHeader.toLowerCase());
}

/** True when an `Origin` header names the `Host` the request was sent to (any letter case). */
export function originNamesHost(origin: string, host: string | undefined): boolean {
  if (!host) return false;
  try {
    return new URL(origin).host.toLowerCase() === host.toLowerCase();
  } catch {
    return false;
  }
}

/**
 * True for a state-changing request sent by a page of another site: a browser lets any page
 * POST to 127.0.0.1 (a "simple" request needs no preflight), so such requests must be refused
 * even from loopback. Non-browser clients send no Origin and pass.
 */
export function isCrossSiteWrite(
  method: string,
  origin: string | undefined,
  host: string | undefined,
  fetchSite: string | undefined,
): boolean {
  if (method === "GET" || method === "HEAD" || method === "OPTIONS") return false;
  if (fetchSite === "cross-site") return true;
  if (!origin) return false;
  try {
    return new URL(origin).host !== host;
  } catch {
    return true;
  }
}
