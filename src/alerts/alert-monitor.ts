/**
 * Alerts: conditions observed on a timer, each raised once when it has held for `after` and
 * cleared once when it no longer holds, told to a webhook and a chat. And a heartbeat URL fetched
 * while nothing is raised (a dead-man's switch: the external monitor hears silence when the
 * gateway is unhealthy or gone). Nothing here is on a turn's path: observing reads status the
 * gateway already keeps, and delivery runs behind the tick (alert-delivery.ts).
 */
import type { Logger } from "pino";

/** A condition that holds right now. */
export interface Observation {
  /** Stable name, e.g. `platform_down:telegram`: raised and cleared under it. */
  alert: string;
  detail: string;
  /**
   * Since when it holds (epoch ms), when the source knows (the oldest undelivered reply's time);
   * otherwise since the first tick that saw it.
   */
  since?: number;
  /** Raised at once, not after `after` (a breaker holding work back, a full disk). */
  immediate?: boolean;
}

export interface AlertEvent {
  alert: string;
  state: "raised" | "cleared";
  detail: string;
  /** ISO time. */
  at: string;
}

export interface AlertMonitorOptions {
  /** Every condition that holds now; a failing source is logged and treated as "no change". */
  observe(): Promise<Observation[]>;
  /** Told each raise and clear; must not throw or block (queues its deliveries). */
  notify(event: AlertEvent): void;
  /** How long a condition must hold before it is raised. */
  afterMs: number;
  /** While nothing is raised, called every `heartbeatEveryMs` (absent: no heartbeat). */
  heartbeat?: { everyMs: number; beat(): void };
  /** How often conditions are looked at. */
  checkEveryMs: number;
  now: () => number;
  logger: Logger;
}

interface Tracked {
  since: number;
  detail: string;
  raised: boolean;
}

export class AlertMonitor {
  private readonly tracked = new Map<string, Tracked>();
  private timer: NodeJS.Timeout | null = null;
  private ticking: Promise<void> | null = null;
  private lastBeatAt: number | null = null;

  constructor(private readonly options: AlertMonitorOptions) {}

  start(): void {
    if (this.timer) return;
    this.timer = setInterval(() => void this.tick(), this.options.checkEveryMs);
    this.timer.unref();
    void this.tick();
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.ticking;
  }

  /** The alerts raised now. */
  raised(): string[] {
    return [...this.tracked].filter(([, t]) => t.raised).map(([name]) => name);
  }

  /** One look at every condition; overlapping calls share one. */
  tick(): Promise<void> {
    this.ticking ??= this.evaluate().finally(() => {
      this.ticking = null;
    });
    return this.ticking;
  }

  private async evaluate(): Promise<void> {
    let observed: Observation[];
    try {
      observed = await this.options.observe();
    } catch (err) {
      this.options.logger.warn({ err }, "alert conditions could not be observed");
      return;
    }
    const now = this.options.now();
    const holding = new Map(observed.map((o) => [o.alert, o]));
    for (const [name, tracked] of this.tracked) {
      if (holding.has(name)) continue;
      this.tracked.delete(name);
      if (tracked.raised) this.emit(name, "cleared", `no longer: ${tracked.detail}`, now);
    }
    for (const o of observed) {
      const tracked = this.tracked.get(o.alert) ?? { since: now, detail: o.detail, raised: false };
      if (o.since !== undefined) tracked.since = o.since;
      tracked.detail = o.detail;
      this.tracked.set(o.alert, tracked);
      const due = o.immediate || now - tracked.since >= this.options.afterMs;
      if (due && !tracked.raised) {
        tracked.raised = true;
        this.emit(o.alert, "raised", o.detail, now);
      } else if (!due && tracked.raised) {
        // A source that knows its age says it is young again (the old reply went out).
        tracked.raised = false;
        this.emit(o.alert, "cleared", `no longer: ${o.detail}`, now);
      }
    }
    this.beat(now);
  }

  private beat(now: number): void {
    const heartbeat = this.options.heartbeat;
    if (!heartbeat || this.raised().length > 0) return;
    if (this.lastBeatAt !== null && now - this.lastBeatAt < heartbeat.everyMs) return;
    this.lastBeatAt = now;
    heartbeat.beat();
  }

  private emit(alert: string, state: AlertEvent["state"], detail: string, now: number): void {
    const log = state === "raised" ? "warn" : "info";
    this.options.logger[log]({ alert, detail }, `alert ${state}`);
    this.options.notify({ alert, state, detail, at: new Date(now).toISOString() });
  }
}
