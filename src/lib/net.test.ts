import { describe, expect, it } from "vitest";
import { backoffMs, isLoopback } from "./net.js";

describe("isLoopback", () => {
  it("accepts the loopback names and addresses, IPv4-mapped included", () => {
    for (const host of ["localhost", "::1", "127.0.0.1", "127.8.9.10", "::ffff:127.0.0.1"])
      expect(isLoopback(host), host).toBe(true);
  });

  it("refuses everything else, including empty values", () => {
    for (const host of [
      "0.0.0.0",
      "::",
      "10.0.0.1",
      "::ffff:10.0.0.1",
      "example.com",
      "",
      undefined,
    ])
      expect(isLoopback(host), String(host)).toBe(false);
  });
});

describe("backoffMs", () => {
  it("starts at the base, doubles, and stops at the cap", () => {
    expect([1, 2, 3, 4, 5, 6].map((retry) => backoffMs(retry, 1000, 30_000))).toEqual([
      1000, 2000, 4000, 8000, 16_000, 30_000,
    ]);
    expect(backoffMs(10_000, 1000, 30_000)).toBe(30_000);
  });

  it("with jitter, draws from the top share below the bound and never above it", () => {
    expect(backoffMs(3, 1000, 30_000, 0.2, () => 0)).toBe(4000);
    expect(backoffMs(3, 1000, 30_000, 0.2, () => 0.5)).toBe(3600);
    expect(backoffMs(3, 1000, 30_000, 0.2, () => 0.999_999)).toBe(3200);
    expect(backoffMs(50, 1000, 30_000, 0.2, () => 0)).toBe(30_000);
  });
});
