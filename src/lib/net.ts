/** Small network rules used on both sides of the gateway (its listen address, its peers, its retries). */

/**
 * True for a loopback host name or address: `localhost`, `::1`, anything in 127.0.0.0/8, and
 * IPv4-mapped 127.x (`::ffff:127.0.0.1`, how a dual-stack socket reports a local peer).
 */
export function isLoopback(hostOrAddress: string | undefined): boolean {
  if (!hostOrAddress) return false;
  return (
    hostOrAddress === "localhost" ||
    hostOrAddress === "::1" ||
    hostOrAddress.startsWith("127.") ||
    hostOrAddress.startsWith("::ffff:127.")
  );
}

/** Exponential backoff: `baseMs` before the first retry, doubling each time, at most `maxMs`. */
export function backoffMs(retry: number, baseMs: number, maxMs: number): number {
  return Math.min(maxMs, baseMs * 2 ** Math.min(Math.max(retry - 1, 0), 30));
}
