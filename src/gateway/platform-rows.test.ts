import { describe, expect, it } from "vitest";
import { platformRows } from "./platform-rows.js";

describe("platformRows", () => {
  const now = Date.parse("2026-01-01T12:00:00.000Z");

  it("reports the connection's health and the later of its sign of life and its last message", () => {
    const rows = platformRows(
      {
        telegram: { error: null },
        slack: { error: "Cannot reach Slack" },
        webchat: { error: null },
        discord: { error: null },
      },
      {
        telegram: { state: "stalled", lastEventAt: now - 125_000 },
        slack: { state: "reconnecting", lastEventAt: now - 60_000 },
        webchat: { state: "connected", lastEventAt: null },
        discord: { state: "disabled", lastEventAt: null },
      },
      (name) => ({ slack: now - 5_000, webchat: now - 2_000 })[name] ?? null,
      now,
    );
    expect(rows).toEqual({
      telegram: {
        state: "stalled",
        error: null,
        last_event_at: "2026-01-01T11:57:55.000Z",
        last_event_age_s: 125,
      },
      slack: {
        state: "reconnecting",
        error: "Cannot reach Slack",
        last_event_at: "2026-01-01T11:59:55.000Z",
        last_event_age_s: 5,
      },
      webchat: {
        state: "connected",
        error: null,
        last_event_at: "2026-01-01T11:59:58.000Z",
        last_event_age_s: 2,
      },
      discord: { state: "disabled", error: null, last_event_at: null, last_event_age_s: null },
    });
  });
});
