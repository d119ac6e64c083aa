/**
 * Per-sender rate limits (`limits.per_user`, `limits.per_chat`): a message over the rate is not
 * dropped; it stays pending in the inbox and starts, in order, when the window allows. Each chat
 * keeps its own line, so a chat's messages never overtake one another; the sender is told once
 * per wait that they are queued. The windows live in memory: after a restart the pending
 * messages come back from the inbox in order and are admitted afresh.
 */
import type { SenderGate } from "../runner/agent-run.js";
import type { InboxItem } from "../sessions/store.js";

export interface RateLimit {
  messages: number;
  /** Seconds. */
  per: number;
}

export interface SenderLimitsOptions {
  perUser?: RateLimit | undefined;
  perChat?: RateLimit | undefined;
  exemptOperators: boolean;
  /** Tells the chat its sender is queued (once per wait). */
  notify(item: InboxItem, text: string): void;
  now?: () => number;
}

interface Waiting {
  item: InboxItem;
  release(item: InboxItem): void;
}

export function queuedText(limit: RateLimit, what: "you" | "this chat"): string {
  const seconds = Number.isInteger(limit.per) ? String(limit.per) : limit.per.toFixed(1);
  return (
    `⏳ ${what === "you" ? "You are" : "This chat is"} sending faster than ${limit.messages} ` +
    `message(s) per ${seconds} s: the next ones wait in line and are answered in order as the ` +
    "limit allows. Nothing is dropped."
  );
}

export class SenderLimits implements SenderGate {
  private readonly now: () => number;
  /** Start times of admitted messages, per window key (`user:<platform>:<id>`, `chat:...`). */
  private readonly windows = new Map<string, number[]>();
  /** Messages waiting, per chat line (session key), oldest first. */
  private readonly lines = new Map<string, Waiting[]>();
  /** Ids admitted from a line: their second pass through `hold` lets them by. */
  private readonly admitted = new Set<number>();
  private timer: NodeJS.Timeout | null = null;

  constructor(private readonly options: SenderLimitsOptions) {
    this.now = options.now ?? Date.now;
  }

  /** True when the message must wait: `release` starts it later, in order. */
  hold(item: InboxItem, release: (item: InboxItem) => void): boolean {
    if (this.admitted.delete(item.id)) return false;
    const keys = this.keysOf(item);
    if (keys.length === 0) return false;
    const line = this.lines.get(item.sessionKey);
    if (!line && this.fits(keys)) {
      this.count(keys);
      return false;
    }
    if (line) line.push({ item, release });
    else {
      this.lines.set(item.sessionKey, [{ item, release }]);
      this.tellQueued(item, keys);
    }
    this.arm();
    return true;
  }

  /** Messages waiting now (status and tests). */
  waiting(): number {
    let count = 0;
    for (const line of this.lines.values()) count += line.length;
    return count;
  }

  stop(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }

  private keysOf(item: InboxItem): { key: string; limit: RateLimit }[] {
    // Scheduled runs are the gateway's own; operators are exempt unless configured otherwise.
    if (item.platform === "schedule") return [];
    if (item.operator === true && this.options.exemptOperators) return [];
    const keys: { key: string; limit: RateLimit }[] = [];
    const { perUser, perChat } = this.options;
    if (perUser && item.senderId !== undefined) {
      keys.push({ key: `user:${item.platform}:${item.senderId}`, limit: perUser });
    }
    if (perChat) keys.push({ key: `chat:${item.platform}:${item.chatId}`, limit: perChat });
    return keys;
  }

  /** The admitted starts still inside each window. */
  private recent(key: string, limit: RateLimit): number[] {
    const since = this.now() - limit.per * 1000;
    const kept = (this.windows.get(key) ?? []).filter((at) => at > since);
    if (kept.length > 0) this.windows.set(key, kept);
    else this.windows.delete(key);
    return kept;
  }

  private fits(keys: { key: string; limit: RateLimit }[]): boolean {
    return keys.every(({ key, limit }) => this.recent(key, limit).length < limit.messages);
  }

  private count(keys: { key: string; limit: RateLimit }[]): void {
    const at = this.now();
    for (const { key } of keys) this.windows.set(key, [...(this.windows.get(key) ?? []), at]);
  }

  /** When the soonest of the windows holding `keys` lets one more in. */
  private opensAt(keys: { key: string; limit: RateLimit }[]): number {
    let at = this.now();
    for (const { key, limit } of keys) {
      const recent = this.recent(key, limit);
      if (recent.length >= limit.messages) {
        at = Math.max(at, recent[recent.length - limit.messages]! + limit.per * 1000);
      }
    }
    return at;
  }

  private tellQueued(item: InboxItem, keys: { key: string; limit: RateLimit }[]): void {
    const full = keys.find(({ key, limit }) => this.recent(key, limit).length >= limit.messages);
    const which = full ?? keys[0]!;
    this.options.notify(
      item,
      queuedText(which.limit, which.key.startsWith("user:") ? "you" : "this chat"),
    );
  }

  /** Starts every line's head the windows allow now, in order, and waits for the next. */
  private pass(): void {
    this.timer = null;
    let next = Number.POSITIVE_INFINITY;
    for (const [sessionKey, line] of this.lines) {
      while (line.length > 0) {
        const head = line[0]!;
        const keys = this.keysOf(head.item);
        if (!this.fits(keys)) {
          next = Math.min(next, this.opensAt(keys));
          break;
        }
        line.shift();
        this.count(keys);
        this.admitted.add(head.item.id);
        head.release(head.item);
      }
      if (line.length === 0) this.lines.delete(sessionKey);
    }
    if (Number.isFinite(next)) this.arm(next);
  }

  private arm(at?: number): void {
    if (this.timer) return;
    const wakeAt = at ?? this.soonest();
    // A little past the window's edge: the oldest start has then surely left it.
    const delay = Math.max(0, wakeAt - this.now()) + 5;
    this.timer = setTimeout(() => this.pass(), delay);
    this.timer.unref();
  }

  private soonest(): number {
    let at = Number.POSITIVE_INFINITY;
    for (const line of this.lines.values()) {
      const head = line[0];
      if (head) at = Math.min(at, this.opensAt(this.keysOf(head.item)));
    }
    return Number.isFinite(at) ? at : this.now();
  }
}
