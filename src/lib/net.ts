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

/**
 * The one exponential backoff: `baseMs` before the first retry, doubling each time, at most
 * `maxMs`. With `jitter` (a share from 0 to 1) the wait is drawn from that top share below the
 * bound, so many clients retrying after one outage spread out; the bound itself never grows.
 */
export function backoffMs(
  retry: number,
  baseMs: number,
  maxMs: number,
  jitter = 0,
  random: () => number = Math.random,
): number {
  const bound = Math.min(maxMs, baseMs * 2 ** Math.min(Math.max(retry - 1, 0), 30));
  return jitter > 0 ? Math.round(bound * (1 - Math.min(jitter, 1) * random())) : bound;
}
