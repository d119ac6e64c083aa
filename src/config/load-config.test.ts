import { readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createTempDir } from "../../test/helpers/temp-home.js";
import { ConfigError } from "../lib/errors.js";
import { loadConfig } from "./load-config.js";

describe("loadConfig", () => {
  let dir: ReturnType<typeof createTempDir>;
  beforeEach(() => {
    dir = createTempDir();
  });
  afterEach(() => dir.cleanup());

  const write = (yaml: string) => writeFileSync(join(dir.path, "config.yaml"), yaml);
  const load = (env: Record<string, string> = {}) => loadConfig({ home: dir.path, env });

  it("starts on embedded defaults without a config file", () => {
    const { config, warnings } = load();
    expect(config.http).toMatchObject({ host: "127.0.0.1", port: 8642 });
    expect(config.agent.max_iterations).toBe(90);
    expect(config.agent.restart_drain_timeout).toBe(0);
    expect(config.display.busy_input_mode).toBe("interrupt");
    expect(config.model.base_url).toBeUndefined();
    expect(config.cwd).toBe(join(dir.path, "workspace"));
    expect(config.telegramEnabled).toBe(false);
    expect(warnings).toEqual([]);
  });

  it("generates the control token once, with mode 0600", () => {
    const first = load().config.controlToken;
    expect(first.length).toBeGreaterThanOrEqual(16);
    expect(load().config.controlToken).toBe(first);
    expect(statSync(join(dir.path, "control_token")).mode & 0o777).toBe(0o600);
  });

  it("prefers the environment over the file over the default", () => {
    write("agent:\n  max_iterations: 5\n  restart_drain_timeout: 30\n");
    expect(load().config.agent.max_iterations).toBe(5);
    const { config } = load({ KEEL_MAX_ITERATIONS: "7" });
    expect(config.agent.max_iterations).toBe(7);
    expect(config.agent.restart_drain_timeout).toBe(30);
  });

  it("substitutes ${VAR} references from the environment", () => {
    write("model:\n  base_url: http://127.0.0.1:9/v1\n  api_key: ${MY_KEY}\n  name: m\n");
    expect(load({ MY_KEY: "sekrit" }).config.model.api_key).toBe("sekrit");
    expect(() => load()).toThrow(/model\.api_key: references \$\{MY_KEY\}/);
  });

  it("rejects unknown keys, naming the key and the file", () => {
    write("agent:\n  max_iteration: 5\n");
    try {
      load();
      expect.unreachable();
    } catch (err) {
      expect(err).toBeInstanceOf(ConfigError);
      expect((err as Error).message).toContain("agent.max_iteration: unknown key");
      expect((err as Error).message).toContain(join(dir.path, "config.yaml"));
    }
  });

  it("rejects invalid values and malformed YAML", () => {
    write("http:\n  port: lots\n");
    expect(() => load()).toThrow(/http\.port/);
    write("agent: [unclosed\n");
    expect(() => load()).toThrow(/not valid YAML/);
    expect(() => load({ KEEL_HTTP_PORT: "99999" })).toThrow(ConfigError);
  });

  it("warns and uses the default for an invalid drain timeout or busy mode", () => {
    const { config, warnings } = load({
      KEEL_RESTART_DRAIN_TIMEOUT: "abc",
      KEEL_GATEWAY_BUSY_INPUT_MODE: "shout",
    });
    expect(config.agent.restart_drain_timeout).toBe(0);
    expect(config.display.busy_input_mode).toBe("interrupt");
    expect(warnings).toContain("Invalid restart_drain_timeout 'abc', using default 0s");
    expect(warnings).toContain("Invalid busy_input_mode 'shout', using default interrupt");
  });

  it("refuses a non-loopback host unless the API key and control token are set", () => {
    expect(() => load({ KEEL_HTTP_HOST: "0.0.0.0" })).toThrow(/not loopback/);
    const { config } = load({
      KEEL_HTTP_HOST: "0.0.0.0",
      KEEL_API_KEY: "k".repeat(20),
      KEEL_CONTROL_TOKEN: "t".repeat(20),
    });
    expect(config.http.host).toBe("0.0.0.0");
  });

  it("turns Telegram on when a token is set and parses allowed users", () => {
    const { config } = load({ TELEGRAM_BOT_TOKEN: "123:abc", TELEGRAM_ALLOWED_USERS: "1, 2" });
    expect(config.telegramEnabled).toBe(true);
    expect(config.platforms.telegram.allowed_users).toEqual(["1", "2"]);
    expect(readFileSync(join(dir.path, "control_token"), "utf8").trim()).toBe(config.controlToken);
  });

  describe("lifecycle settings (hermes-agent's rules, seed 000)", () => {
    it("restart_drain_timeout prefers env, then config, then the default of 0", () => {
      expect(load().config.agent.restart_drain_timeout).toBe(0);
      write("agent:\n  restart_drain_timeout: 45\n");
      expect(load().config.agent.restart_drain_timeout).toBe(45);
      expect(load({ KEEL_RESTART_DRAIN_TIMEOUT: "12.5" }).config.agent.restart_drain_timeout).toBe(
        12.5,
      );
    });

    it("an invalid env drain timeout falls back to the default, not the file's value, with the documented warning", () => {
      write("agent:\n  restart_drain_timeout: 45\n");
      const { config, warnings } = load({ KEEL_RESTART_DRAIN_TIMEOUT: "abc" });
      expect(config.agent.restart_drain_timeout).toBe(0);
      expect(warnings).toEqual(["Invalid restart_drain_timeout 'abc', using default 0s"]);
    });

    it("a negative drain timeout in the file is invalid too; a blank env value counts as unset", () => {
      write("agent:\n  restart_drain_timeout: -5\n");
      expect(load().warnings).toEqual(["Invalid restart_drain_timeout '-5', using default 0s"]);
      write("agent:\n  restart_drain_timeout: 30\n");
      expect(load({ KEEL_RESTART_DRAIN_TIMEOUT: "" }).config.agent.restart_drain_timeout).toBe(30);
    });

    it("busy_input_mode prefers env, then config, then interrupt", () => {
      expect(load().config.display.busy_input_mode).toBe("interrupt");
      write("display:\n  busy_input_mode: queue\n");
      expect(load().config.display.busy_input_mode).toBe("queue");
      expect(load({ KEEL_GATEWAY_BUSY_INPUT_MODE: "steer" }).config.display.busy_input_mode).toBe(
        "steer",
      );
    });

    it("an unknown busy mode falls back to interrupt with a warning", () => {
      write("display:\n  busy_input_mode: shout\n");
      const { config, warnings } = load();
      expect(config.display.busy_input_mode).toBe("interrupt");
      expect(warnings).toEqual(["Invalid busy_input_mode 'shout', using default interrupt"]);
    });
  });
});
