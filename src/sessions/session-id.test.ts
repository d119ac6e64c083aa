import { describe, expect, it } from "vitest";
import { newSessionId } from "./session-id.js";

describe("newSessionId", () => {
  it("does not repeat among many ids made in the same second", () => {
    const now = Date.UTC(2026, 10, 28, 3, 0, 0);
    const ids = new Set(Array.from({ length: 100_000 }, () => newSessionId(now)));
    expect(ids.size).toBe(100_000);
    expect([...ids][0]).toMatch(/^20261128-030000-[0-9a-f]+$/);
  });
});
