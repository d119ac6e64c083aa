/** GatewayMetrics fed directly: the events only a crash or a live platform would otherwise give. */
import { describe, expect, it } from "vitest";
import { sampleValue } from "../../test/helpers/prometheus-text.js";
import type { ConnectionReport } from "../contract/platform.js";
import { GatewayMetrics } from "./gateway-metrics.js";

function metricsWith(connections: Record<string, ConnectionReport>, now = 100_000) {
  let clock = now;
  const metrics = new GatewayMetrics(
    {
      backlog: async () => ({
        inboxPending: 3,
        outboxPending: 2,
        outboxOldestAt: 40_000,
        approvalsPending: 1,
        budgetPausesPending: 2,
      }),
      connections: () => connections,
      tasksRunning: () => 0,
      now: () => clock,
    },
    () => ["telegram", "slack"],
  );
  return { metrics, advance: (ms: number) => (clock += ms) };
}

const base = { sessionKey: "agent:main:telegram:dm:42", sessionId: "s1", turnId: 7 };

describe("GatewayMetrics", () => {
  it("counts resumed turns, and labels a turn by its platform, never its chat", async () => {
    const { metrics, advance } = metricsWith({});
    metrics.onRunnerEvent({ ...base, type: "turn_start", inboxId: null, resume: true });
    advance(2_500);
    metrics.onRunnerEvent({
      ...base,
      type: "turn_end",
      inboxId: null,
      stopReason: "error",
      reply: "",
      abortCause: null,
    });
    metrics.onRunnerEvent({
      sessionKey: "system:notices:x",
      sessionId: "s2",
      turnId: 8,
      type: "turn_start",
      inboxId: 1,
      resume: false,
    });
    metrics.onRunnerEvent({
      sessionKey: "system:notices:x",
      sessionId: "s2",
      turnId: 8,
      type: "turn_end",
      inboxId: 1,
      stopReason: "stop",
      reply: "",
      abortCause: null,
    });
    const text = await metrics.render();
    expect(sampleValue(text, "keel_resumed_turns_total")).toBe(1);
    expect(sampleValue(text, "keel_turns_total", { platform: "telegram", outcome: "error" })).toBe(
      1,
    );
    expect(sampleValue(text, "keel_turns_total", { platform: "other", outcome: "stop" })).toBe(1);
    expect(sampleValue(text, "keel_turn_duration_seconds_sum", { platform: "telegram" })).toBe(2.5);
    expect(text).not.toContain("dm:42");
  });

  it("reads the store's backlog and each platform's connection when scraped", async () => {
    const { metrics } = metricsWith({
      telegram: { state: "connected", lastEventAt: 95_000 },
      slack: { state: "stalled", lastEventAt: 10_000 },
      api: { state: "connected", lastEventAt: null },
    });
    const text = await metrics.render();
    expect(sampleValue(text, "keel_inbox_pending")).toBe(3);
    expect(sampleValue(text, "keel_outbox_pending")).toBe(2);
    expect(sampleValue(text, "keel_outbox_oldest_age_seconds")).toBe(60);
    expect(sampleValue(text, "keel_approvals_pending")).toBe(1);
    expect(sampleValue(text, "keel_budget_pauses_pending")).toBe(2);
    expect(sampleValue(text, "keel_tasks_running")).toBe(0);
    expect(sampleValue(text, "keel_platform_connected", { platform: "telegram" })).toBe(1);
    expect(sampleValue(text, "keel_platform_connected", { platform: "slack" })).toBe(0);
    expect(
      sampleValue(text, "keel_platform_last_event_age_seconds", { platform: "telegram" }),
    ).toBe(5);
    expect(sampleValue(text, "keel_platform_last_event_age_seconds", { platform: "slack" })).toBe(
      90,
    );
    expect(
      sampleValue(text, "keel_platform_last_event_age_seconds", { platform: "api" }),
    ).toBeUndefined();
  });

  it("times model calls by outcome and counts the tokens of answered ones", async () => {
    const { metrics } = metricsWith({});
    metrics.onModelAttempt({
      model: "m1",
      attempt: 1,
      outcome: "ok",
      durationMs: 1500,
      usage: { promptTokens: 120, completionTokens: 30, estimated: false },
    });
    metrics.onModelAttempt({ model: "m1", attempt: 1, outcome: "timeout", durationMs: 500 });
    const text = await metrics.render();
    expect(
      sampleValue(text, "keel_model_request_duration_seconds_sum", { model: "m1", outcome: "ok" }),
    ).toBe(1.5);
    expect(
      sampleValue(text, "keel_model_request_duration_seconds_count", {
        model: "m1",
        outcome: "timeout",
      }),
    ).toBe(1);
    expect(sampleValue(text, "keel_model_tokens_total", { model: "m1", direction: "input" })).toBe(
      120,
    );
    expect(sampleValue(text, "keel_model_tokens_total", { model: "m1", direction: "output" })).toBe(
      30,
    );
  });
});
