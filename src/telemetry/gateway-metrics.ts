/**
 * The gateway's Prometheus metrics (`GET /metrics`), one registry per gateway (tests run several
 * in one process). Counters and histograms are fed from events the parts already emit (runner
 * events, model attempts, store commits); the gauges that need the store or the platforms are
 * read when scraped, so the hot path pays nothing for them. Labels are bounded: platform names,
 * configured model names, tool names (built-in, or `server__tool` of configured MCP servers),
 * fixed outcomes; never a chat or user id.
 */
import {
  Counter,
  collectDefaultMetrics,
  exponentialBuckets,
  Gauge,
  Histogram,
  Registry,
} from "prom-client";
import type { ModelAttempt } from "../agent/model-chain.js";
import type { ConnectionReport, RunnerEvent } from "../contract/platform.js";
import type { StoreBacklog } from "../sessions/store.js";

/** What the scrape-time gauges read. */
export interface MetricsSources {
  backlog(): Promise<StoreBacklog>;
  connections(): Record<string, ConnectionReport>;
  /** Background tasks running (none exist yet: always 0). */
  tasksRunning(): number;
  now(): number;
}

/** Seconds, from a few ms to a long agent turn. */
const TURN_BUCKETS = [0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600];
const MODEL_BUCKETS = [0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120];
/** 50 µs … ~3 s. */
const COMMIT_BUCKETS = exponentialBuckets(0.00005, 4, 9);

export class GatewayMetrics {
  readonly registry = new Registry();
  private readonly turns: Counter<"platform" | "outcome">;
  private readonly turnDuration: Histogram<"platform">;
  private readonly resumed: Counter;
  private readonly modelDuration: Histogram<"model" | "outcome">;
  private readonly modelTokens: Counter<"model" | "direction">;
  private readonly toolCalls: Counter<"tool" | "outcome">;
  private readonly commitDuration: Histogram;
  /** Turns running, by their id: when each started and on which platform. */
  private readonly running = new Map<number, { startedAt: number; platform: string }>();

  constructor(
    private readonly sources: MetricsSources,
    /** The platform names a session key may carry; anything else is counted as `other`. */
    private readonly platformNames: () => readonly string[],
  ) {
    const registers = [this.registry];
    const counter = <L extends string>(name: string, help: string, labelNames: L[] = []) =>
      new Counter<L>({ name, help, labelNames, registers });
    const histogram = <L extends string>(
      name: string,
      help: string,
      buckets: number[],
      labelNames: L[] = [],
    ) => new Histogram<L>({ name, help, labelNames, buckets, registers });
    this.turns = counter(
      "keel_turns_total",
      "Agent turns finished, by platform and outcome (stop, max_iterations, error, aborted)",
      ["platform", "outcome"],
    );
    this.turnDuration = histogram(
      "keel_turn_duration_seconds",
      "How long agent turns took, start to end",
      TURN_BUCKETS,
      ["platform"],
    );
    this.resumed = counter(
      "keel_resumed_turns_total",
      "Turns that continued work an interruption (crash, restart) had cut short",
    );
    this.modelDuration = histogram(
      "keel_model_request_duration_seconds",
      "How long model calls took, by model and outcome (ok or the failure kind)",
      MODEL_BUCKETS,
      ["model", "outcome"],
    );
    this.modelTokens = counter(
      "keel_model_tokens_total",
      "Tokens of answered model calls, by model and direction (input, output)",
      ["model", "direction"],
    );
    this.toolCalls = counter(
      "keel_tool_calls_total",
      "Tool calls finished, by tool and outcome (ok, error)",
      ["tool", "outcome"],
    );
    this.commitDuration = histogram(
      "keel_store_commit_duration_seconds",
      "How long the store's write transactions took",
      COMMIT_BUCKETS,
    );
    this.scrapeGauges(registers);
    collectDefaultMetrics({ register: this.registry });
  }

  /** The runner's live events: turns and tool calls. */
  onRunnerEvent(event: RunnerEvent): void {
    switch (event.type) {
      case "turn_start":
        this.running.set(event.turnId, {
          startedAt: this.sources.now(),
          platform: this.platformOf(event.sessionKey),
        });
        if (event.resume) this.resumed.inc();
        return;
      case "turn_end": {
        const started = this.running.get(event.turnId);
        this.running.delete(event.turnId);
        const platform = started?.platform ?? this.platformOf(event.sessionKey);
        this.turns.inc({ platform, outcome: event.stopReason });
        if (started) {
          this.turnDuration.observe({ platform }, (this.sources.now() - started.startedAt) / 1000);
        }
        return;
      }
      case "tool_end":
        this.toolCalls.inc({ tool: event.name, outcome: event.isError ? "error" : "ok" });
        return;
    }
  }

  /** One model call ended (the model chain's attempt report). */
  onModelAttempt(attempt: ModelAttempt): void {
    const { model } = attempt;
    if (attempt.durationMs !== undefined) {
      this.modelDuration.observe({ model, outcome: attempt.outcome }, attempt.durationMs / 1000);
    }
    if (attempt.usage) {
      this.modelTokens.inc({ model, direction: "input" }, attempt.usage.promptTokens);
      this.modelTokens.inc({ model, direction: "output" }, attempt.usage.completionTokens);
    }
  }

  /** One store write transaction committed, taking `seconds`. */
  onStoreCommit(seconds: number): void {
    this.commitDuration.observe(seconds);
  }

  /** The text a scraper reads. */
  render(): Promise<string> {
    return this.registry.metrics();
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  /** Session keys read `agent:<agent>:<platform>:…`; only configured platform names are labels. */
  platformOf(sessionKey: string): string {
    const name = sessionKey.split(":")[2];
    return name !== undefined && this.platformNames().includes(name) ? name : "other";
  }

  /** The gauges read at scrape time: the store's queues (one query), the platforms, the tasks. */
  private scrapeGauges(registers: Registry[]): void {
    const { sources } = this;
    // One backlog query per scrape, shared by the four gauges that show it.
    let pendingRead: Promise<StoreBacklog> | null = null;
    const backlog = () => {
      pendingRead ??= sources.backlog().finally(() => {
        setImmediate(() => {
          pendingRead = null;
        });
      });
      return pendingRead;
    };
    const fromBacklog = (name: string, help: string, pick: (b: StoreBacklog) => number) =>
      new Gauge({
        name,
        help,
        registers,
        async collect() {
          this.set(pick(await backlog()));
        },
      });
    fromBacklog(
      "keel_inbox_pending",
      "Messages accepted and not started yet",
      (b) => b.inboxPending,
    );
    fromBacklog(
      "keel_outbox_pending",
      "Replies and notices waiting to be delivered",
      (b) => b.outboxPending,
    );
    fromBacklog(
      "keel_outbox_oldest_age_seconds",
      "Age of the oldest reply waiting to be delivered (0 when none waits)",
      (b) =>
        b.outboxOldestAt === null ? 0 : Math.max(0, (sources.now() - b.outboxOldestAt) / 1000),
    );
    fromBacklog(
      "keel_approvals_pending",
      "Tool calls waiting for a human's approval",
      (b) => b.approvalsPending,
    );
    fromBacklog(
      "keel_budget_pauses_pending",
      "Turns a used-up budget holds until an operator answers",
      (b) => b.budgetPausesPending,
    );
    new Gauge({
      name: "keel_tasks_running",
      help: "Background tasks running (Keel has none yet: always 0)",
      registers,
      collect() {
        this.set(sources.tasksRunning());
      },
    });
    new Gauge({
      name: "keel_platform_connected",
      help: "1 while the platform's connection is up, else 0",
      labelNames: ["platform"],
      registers,
      collect() {
        this.reset();
        for (const [platform, report] of Object.entries(sources.connections())) {
          this.set({ platform }, report.state === "connected" ? 1 : 0);
        }
      },
    });
    new Gauge({
      name: "keel_platform_last_event_age_seconds",
      help: "Seconds since the platform last spoke to the gateway (absent before its first event)",
      labelNames: ["platform"],
      registers,
      collect() {
        this.reset();
        const now = sources.now();
        for (const [platform, report] of Object.entries(sources.connections())) {
          if (report.lastEventAt !== null) {
            this.set({ platform }, Math.max(0, (now - report.lastEventAt) / 1000));
          }
        }
      },
    });
  }
}
