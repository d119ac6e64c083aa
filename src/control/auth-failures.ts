/**
 * Failed authentication per client address: each failure within the window is answered a little
 * later than the one before (exponential, capped), and more than `maxFailures` within the window
 * lock the address out (429 with Retry-After) until enough failures have aged out. Successful
 * requests never pass through here, so they are never slowed.
 */
import { backoffMs } from "../lib/net.js";

export interface AuthFailureOptions {
  /** Failures older than this no longer count. Default 60 s. */
  windowMs?: number;
  /** More failures than this within the window lock the address. Default 10. */
  maxFailures?: number;
  /** Delay of the second failure; each later one doubles it. Default 25 ms. */
  baseDelayMs?: number;
  /** Longest delay of one failure. Default 1 s. */
  maxDelayMs?: number;
  now?: () => number;
}

/** Addresses remembered at most (oldest forgotten first), so a flood cannot exhaust memory. */
const MAX_ADDRESSES = 10_000;

export class AuthFailures {
  private readonly windowMs: number;
  private readonly maxFailures: number;
  private readonly baseDelayMs: number;
  private readonly maxDelayMs: number;
  private readonly now: () => number;
  /** Failure times per address, oldest first, at most 2 × maxFailures kept. */
  private readonly failures = new Map<string, number[]>();

  constructor(options: AuthFailureOptions = {}) {
    this.windowMs = options.windowMs ?? 60_000;
    this.maxFailures = options.maxFailures ?? 10;
    this.baseDelayMs = options.baseDelayMs ?? 25;
    this.maxDelayMs = options.maxDelayMs ?? 1_000;
    this.now = options.now ?? Date.now;
  }

  /** Seconds until `address` may try again (the Retry-After value), or 0 when it is not locked. */
  lockedForSeconds(address: string): number {
    const times = this.recent(clientKey(address));
    if (times.length <= this.maxFailures) return 0;
    // Unlocked once only maxFailures remain: the failure before them must age out.
    const releasing = times[times.length - this.maxFailures - 1]!;
    return Math.max(1, Math.ceil((releasing + this.windowMs - this.now()) / 1000));
  }

  /** Records a failure; returns how long to hold the answer to it (ms). */
  recordFailure(address: string): number {
    const key = clientKey(address);
    const times = this.recent(key);
    times.push(this.now());
    if (times.length > this.maxFailures * 2) times.shift();
    this.failures.delete(key);
    this.failures.set(key, times);
    if (this.failures.size > MAX_ADDRESSES) {
      const oldest = this.failures.keys().next().value;
      if (oldest !== undefined) this.failures.delete(oldest);
    }
    const count = times.length;
    if (count <= 1) return 0;
    return backoffMs(count - 1, this.baseDelayMs, this.maxDelayMs);
  }

  private recent(key: string): number[] {
    const times = this.failures.get(key);
    if (!times) return [];
    const since = this.now() - this.windowMs;
    while (times.length > 0 && times[0]! <= since) times.shift();
    if (times.length === 0) this.failures.delete(key);
    return times;
  }
}

/** The key every loopback address counts against. */
export const LOOPBACK_CLIENT = "loopback";

/**
 * Who a failure is counted against. Every loopback address (all of 127.0.0.0/8, `::1`, and their
 * IPv4-mapped forms) is one client: Linux routes the whole /8 to `lo`, so a local process can bind
 * any of 16 million source addresses, each of which would otherwise get a fresh allowance. An
 * IPv4 client is its address, also in the IPv4-mapped form a dual-stack socket reports
 * (`::ffff:203.0.113.7`). An IPv6 client is its /64: a single host is usually handed a whole /64
 * and could otherwise try every address in it, each with a fresh allowance (and push real
 * lockouts out of the bounded table).
 */
export function clientKey(address: string): string {
  const lower = address.toLowerCase();
  const mapped = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/.exec(lower);
  const v4 = mapped ? mapped[1]! : lower.includes(":") ? null : lower;
  if (v4 !== null) return v4.startsWith("127.") ? LOOPBACK_CLIENT : v4;
  if (/^(0{0,4}:){2,7}0{0,3}1$/.test(lower)) return LOOPBACK_CLIENT;
  const bare = lower.split("%")[0]!;
  const [head = "", tail] = bare.split("::");
  const groupsOf = (part: string) => (part === "" ? [] : part.split(":"));
  const front = groupsOf(head);
  const back = tail === undefined ? [] : groupsOf(tail);
  // A trailing dotted IPv4 part fills two groups.
  const backSize = back.reduce((n, g) => n + (g.includes(".") ? 2 : 1), 0);
  const groups = [...front, ...Array<string>(Math.max(0, 8 - front.length - backSize)).fill("0")];
  const prefix = groups.slice(0, 4).map((g) => Number.parseInt(g, 16).toString(16));
  return `${prefix.join(":")}::/64`;
}
