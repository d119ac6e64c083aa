import { describe, expect, it } from "vitest";
import {
  parseBusyInputMode,
  parseDrainTimeout,
  resolveBusyInputMode,
  resolveDrainTimeout,
} from "./drain-config.js";

const ENV = "KEEL_RESTART_DRAIN_TIMEOUT";

describe("restart_drain_timeout", () => {
  it("prefers env, then config, then the default of 0", () => {
    expect(resolveDrainTimeout({ envName: ENV, env: undefined, file: undefined })).toEqual({
      value: 0,
      source: "default",
    });
    expect(resolveDrainTimeout({ envName: ENV, env: undefined, file: 12 })).toEqual({
      value: 12,
      source: "config.yaml",
    });
    expect(resolveDrainTimeout({ envName: ENV, env: "7", file: 12 })).toEqual({
      value: 7,
      source: ENV,
    });
  });

  it("an invalid env value falls back to the default with a warning naming the setting", () => {
    const parsed = resolveDrainTimeout({ envName: ENV, env: "invalid", file: 12 });
    expect(parsed.value).toBe(0);
    expect(parsed.warning).toBe("Invalid restart_drain_timeout 'invalid', using default 0s");
  });

  it("warns exactly as documented for 'abc'", () => {
    expect(parseDrainTimeout("abc", ENV).warning).toBe(
      "Invalid restart_drain_timeout 'abc', using default 0s",
    );
  });

  it("blank is unset; negative and infinite values are invalid; fractions are kept", () => {
    expect(parseDrainTimeout("  ", ENV)).toEqual({ value: 0, source: "default" });
    expect(parseDrainTimeout(-5, "config.yaml")).toMatchObject({
      value: 0,
      warning: expect.stringContaining("'-5'"),
    });
    expect(parseDrainTimeout("Infinity", ENV).warning).toBeDefined();
    expect(parseDrainTimeout("2.5", ENV).value).toBe(2.5);
    expect(parseDrainTimeout(true, "config.yaml").warning).toBeDefined();
  });
});

describe("busy_input_mode", () => {
  const env = "KEEL_GATEWAY_BUSY_INPUT_MODE";

  it("prefers env, then config, then interrupt", () => {
    expect(resolveBusyInputMode({ envName: env, env: undefined, file: undefined }).value).toBe(
      "interrupt",
    );
    expect(resolveBusyInputMode({ envName: env, env: undefined, file: "queue" }).value).toBe(
      "queue",
    );
    expect(resolveBusyInputMode({ envName: env, env: "interrupt", file: "queue" }).value).toBe(
      "interrupt",
    );
  });

  it("an unknown mode falls back to interrupt with a warning", () => {
    expect(parseBusyInputMode("shout", env)).toEqual({
      value: "interrupt",
      warning: "Invalid busy_input_mode 'shout', using default interrupt",
      source: env,
    });
    expect(parseBusyInputMode(" Steer ", env).value).toBe("steer");
  });
});
