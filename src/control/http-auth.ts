/** Request checks shared by every route group: secrets, loopback peers, the Host header. */
import { createHash, timingSafeEqual } from "node:crypto";
import type { IncomingMessage } from "node:http";

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

export function isLoopbackAddress(address: string | undefined): boolean {
  if (!address) return false;
  return address === "::1" || address.startsWith("127.") || address.startsWith("::ffff:127.");
}

export function isLoopbackPeer(req: IncomingMessage): boolean {
  return isLoopbackAddress(req.socket.remoteAddress);
}

/**
 * True when the Host header names this server: the configured host, or any loopback name when
 * the server listens on loopback. Refusing other names defeats DNS rebinding.
 */
export function isAcceptedHost(hostHeader: string | undefined, configuredHost: string): boolean {
  if (!hostHeader) return false;
  const name = hostHeader.startsWith("[")
    ? hostHeader.slice(1, hostHeader.indexOf("]"))
    : hostHeader.split(":")[0]!;
  const lower = name.toLowerCase();
  if (lower === configuredHost.toLowerCase()) return true;
  const loopbackNames = ["127.0.0.1", "localhost", "::1"];
  const listensOnLoopback =
    loopbackNames.includes(configuredHost) || configuredHost.startsWith("127.");
  if (listensOnLoopback) return loopbackNames.includes(lower) || lower.startsWith("127.");
  // Listening on all interfaces: the operator exposed it on purpose and set both secrets.
  return configuredHost === "0.0.0.0" || configuredHost === "::";
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
