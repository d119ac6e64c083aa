import { describe, expect, it } from "vitest";
import { captureServiceEnv, minimumStopTimeout, stopTimeoutFromDrain } from "./service-spec.js";

describe("stopTimeoutFromDrain", () => {
  it("never goes below 60 s, so a drain of 0 still gets a roomy cleanup", () => {
    expect(stopTimeoutFromDrain(0)).toBe(60);
    expect(stopTimeoutFromDrain(29)).toBe(60);
    expect(stopTimeoutFromDrain(30)).toBe(60);
  });

  it("is drain + 30 s once that exceeds the floor", () => {
    expect(stopTimeoutFromDrain(45)).toBe(75);
    expect(stopTimeoutFromDrain(600)).toBe(630);
  });

  it("rounds a fractional drain up to whole seconds", () => {
    expect(stopTimeoutFromDrain(45.2)).toBe(76);
  });

  it("treats negative or non-finite drains as 0", () => {
    expect(stopTimeoutFromDrain(-5)).toBe(60);
    expect(stopTimeoutFromDrain(Number.NaN)).toBe(60);
    expect(stopTimeoutFromDrain(Number.POSITIVE_INFINITY)).toBe(60);
  });

  it("always leaves at least the 30 s margin the stale-unit check demands", () => {
    for (const drain of [0, 1, 29.5, 45, 90, 600, 3599]) {
      expect(stopTimeoutFromDrain(drain)).toBeGreaterThanOrEqual(minimumStopTimeout(drain));
      expect(minimumStopTimeout(drain)).toBe(Math.ceil(drain) + 30);
    }
  });
});

describe("captureServiceEnv", () => {
  const shell = {
    PATH: "/usr/local/bin:/usr/bin",
    HOME: "/home/ada",
    OPENAI_API_KEY: "sk-secret",
    OPENAI_BASE_URL: "http://127.0.0.1:8000/v1",
    KEEL_MODEL: "m",
    KEEL_HOME: "/elsewhere",
    KEEL_CONTROL_TOKEN: "t".repeat(20),
    TELEGRAM_BOT_TOKEN: "123:abc",
    DISCORD_API_ROOT: "http://127.0.0.1:9/api",
    HTTPS_PROXY: "http://proxy:3128",
    EMPTY_IGNORED: "",
    KEEL_EMPTY: "",
    SSH_AUTH_SOCK: "/tmp/agent",
    UNSET: undefined,
  };

  it("keeps PATH, proxies and Keel/OpenAI/Telegram settings, and forces KEEL_HOME for a user unit", () => {
    const { env, skipped } = captureServiceEnv(shell, { home: "/home/ada/.keel", system: false });
    expect(env).toEqual({
      PATH: "/usr/local/bin:/usr/bin",
      OPENAI_API_KEY: "sk-secret",
      OPENAI_BASE_URL: "http://127.0.0.1:8000/v1",
      KEEL_MODEL: "m",
      KEEL_CONTROL_TOKEN: "t".repeat(20),
      TELEGRAM_BOT_TOKEN: "123:abc",
      DISCORD_API_ROOT: "http://127.0.0.1:9/api",
      HTTPS_PROXY: "http://proxy:3128",
      KEEL_HOME: "/home/ada/.keel",
    });
    expect(skipped).toEqual([]);
  });

  it("leaves secrets out of a system unit and names them", () => {
    const { env, skipped } = captureServiceEnv(shell, { home: "/srv/keel", system: true });
    expect(skipped).toEqual(["KEEL_CONTROL_TOKEN", "OPENAI_API_KEY", "TELEGRAM_BOT_TOKEN"]);
    expect(Object.keys(env).sort()).toEqual([
      "DISCORD_API_ROOT",
      "HTTPS_PROXY",
      "KEEL_HOME",
      "KEEL_MODEL",
      "OPENAI_BASE_URL",
      "PATH",
    ]);
  });
});
