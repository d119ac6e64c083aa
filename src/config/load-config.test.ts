import { chmodSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createTempDir } from "../../test/helpers/temp-home.js";
import { ConfigError } from "../lib/errors.js";
import { loadConfig } from "./load-config.js";
import { describeStoreTarget, storeTarget } from "./store-target.js";

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

  it("approvals default to dangerous; a bad pattern or MCP server is an error naming its key", () => {
    expect(load().config.tools).toMatchObject({ approval: "dangerous", approval_timeout: 600 });
    write('tools:\n  dangerous_patterns: ["(unclosed"]\n');
    expect(() => load()).toThrow(/tools\.dangerous_patterns.*regular expression/s);
    write("mcp:\n  servers:\n    files: { command: x, url: 'http://127.0.0.1:1/mcp' }\n");
    expect(() => load()).toThrow(/mcp\.servers\.files/);
    write("mcp:\n  servers:\n    files: { url: 'http://127.0.0.1:1/mcp' }\n");
    expect(load().config.mcp.servers.files).toMatchObject({ approval: "dangerous", headers: {} });
  });

  it("generates the control token once, with mode 0600", () => {
    const first = load().config.controlToken;
    expect(first.length).toBeGreaterThanOrEqual(16);
    expect(load().config.controlToken).toBe(first);
    expect(statSync(join(dir.path, "control_token")).mode & 0o777).toBe(0o600);
  });

  it("creates a missing home 0700, and reads nothing in a home others may write to", () => {
    const fresh = join(dir.path, "new-home");
    loadConfig({ home: fresh, env: {} });
    expect(statSync(fresh).mode & 0o777).toBe(0o700);
    // A config that would not even parse: the home is refused before it is read.
    writeFileSync(join(fresh, "config.yaml"), "not: [valid");
    chmodSync(fresh, 0o707);
    let thrown: unknown;
    try {
      loadConfig({ home: fresh, env: {} });
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(ConfigError);
    expect((thrown as ConfigError).subject).toBe("home");
    expect((thrown as ConfigError).issues).toEqual([
      expect.stringContaining(`${fresh} (the Keel home) is writable by others (mode 0707)`),
    ]);
  });

  it("prefers the environment over the file over the default", () => {
    write("agent:\n  max_iterations: 5\n  restart_drain_timeout: 30\n");
    expect(load().config.agent.max_iterations).toBe(5);
    const { config } = load({ KEEL_MAX_ITERATIONS: "7" });
    expect(config.agent.max_iterations).toBe(7);
    expect(config.agent.restart_drain_timeout).toBe(30);
  });

  it("selects the store from store.url / KEEL_DATABASE_URL: postgres:// only, SQLite otherwise", () => {
    expect(storeTarget(load().config)).toEqual({
      kind: "sqlite",
      path: join(dir.path, "state.db"),
    });
    write("store:\n  url: postgres://keel@db.internal:5432/keel\n");
    expect(storeTarget(load().config)).toEqual({
      kind: "postgres",
      url: "postgres://keel@db.internal:5432/keel",
    });
    const url = "postgresql://keel:pw@10.0.0.5/keel";
    const fromEnv = load({ KEEL_DATABASE_URL: url });
    expect(storeTarget(fromEnv.config)).toEqual({ kind: "postgres", url });
    expect(fromEnv.warnings).toEqual([]);
    expect(describeStoreTarget(storeTarget(fromEnv.config))).toBe(
      "Postgres postgresql://keel:***@10.0.0.5/keel",
    );
    // Anything else keeps SQLite, and says so rather than letting a typo pass silently.
    const typo = load({ KEEL_DATABASE_URL: "postgress://db/keel" });
    expect(storeTarget(typo.config).kind).toBe("sqlite");
    expect(typo.warnings).toEqual([expect.stringContaining("store.url is not a postgres:// URL")]);
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
    expect(warnings).toContain(
      "Invalid restart_drain_timeout 'abc', using default 0s (KEEL_RESTART_DRAIN_TIMEOUT)",
    );
    expect(warnings).toContain(
      "Invalid busy_input_mode 'shout', using default interrupt (KEEL_GATEWAY_BUSY_INPUT_MODE)",
    );
  });

  it("warns about a misspelt KEEL_ variable, naming the one it resembles", () => {
    const { config, warnings } = load({ KEEL_HTTP_PROT: "9999", KEEL_MODLE: "m" });
    expect(config.http.port).toBe(8642);
    expect(warnings).toEqual([
      "KEEL_HTTP_PROT is not a Keel setting and is ignored (did you mean KEEL_HTTP_PORT?)",
      "KEEL_MODLE is not a Keel setting and is ignored (did you mean KEEL_MODEL?)",
    ]);
    // A name close to nothing is someone else's variable, not a misspelling.
    expect(load({ KEEL_E2E_RUN_ID: "x", KEEL_HOME: dir.path }).warnings).toEqual([]);
  });

  it("refuses a non-loopback host unless the API key, control token and public hosts are set", () => {
    expect(() => load({ KEEL_HTTP_HOST: "0.0.0.0" })).toThrow(/not loopback/);
    const secrets = { KEEL_API_KEY: "k".repeat(20), KEEL_CONTROL_TOKEN: "t".repeat(20) };
    expect(() => load({ KEEL_HTTP_HOST: "0.0.0.0", ...secrets })).toThrow(
      /http\.public_hosts \(KEEL_HTTP_PUBLIC_HOSTS\)/,
    );
    const { config } = load({
      KEEL_HTTP_HOST: "0.0.0.0",
      KEEL_HTTP_PUBLIC_HOSTS: "Keel.Example.com, keel.example.com:8443",
      ...secrets,
    });
    expect(config.http.host).toBe("0.0.0.0");
    expect(config.http.public_hosts).toEqual(["keel.example.com", "keel.example.com:8443"]);
  });

  it("reads trust_loopback and the Telegram admin users from the environment", () => {
    expect(load({}).config.http.trust_loopback).toBe(false);
    const { config } = load({ KEEL_HTTP_TRUST_LOOPBACK: "true", TELEGRAM_ADMIN_USERS: "7, 8" });
    expect(config.http.trust_loopback).toBe(true);
    expect(config.platforms.telegram.admin_users).toEqual(["7", "8"]);
  });

  it("turns Telegram on when a token is set and parses allowed users", () => {
    const { config } = load({ TELEGRAM_BOT_TOKEN: "123:abc", TELEGRAM_ALLOWED_USERS: "1, 2" });
    expect(config.telegramEnabled).toBe(true);
    expect(config.platforms.telegram.allowed_users).toEqual(["1", "2"]);
    expect(readFileSync(join(dir.path, "control_token"), "utf8").trim()).toBe(config.controlToken);
  });

  describe("the error report", () => {
    const problems = (env: Record<string, string> = {}): string[] => {
      try {
        load(env);
      } catch (err) {
        expect(err).toBeInstanceOf(ConfigError);
        return (err as ConfigError).issues;
      }
      throw new Error("expected a ConfigError");
    };
    const file = () => join(dir.path, "config.yaml");

    it("lists every problem at once, each with the file's line, in file order", () => {
      write("agent:\n  max_iteration: 5\nhttp:\n  port: lots\nmodel:\n  name: 7\n");
      expect(problems()).toEqual([
        `${file()}:2: agent.max_iteration: unknown key (did you mean agent.max_iterations?)`,
        expect.stringMatching(new RegExp(`^${file()}:4: http\\.port: `)),
        expect.stringMatching(new RegExp(`^${file()}:6: model\\.name: `)),
      ]);
    });

    it("suggests where a misplaced section belongs", () => {
      write("telegram:\n  token: abc\nplatform:\n  api:\n    enabled: true\n");
      expect(problems()).toEqual([
        `${file()}:1: telegram: unknown key (did you mean platforms.telegram?)`,
        `${file()}:3: platform: unknown key (did you mean platforms?)`,
      ]);
    });

    it("does not guess when nothing is close", () => {
      write("zzzzzzzz: 1\n");
      expect(problems()).toEqual([`${file()}:1: zzzzzzzz: unknown key`]);
    });

    it("names the environment variable, not config.yaml, for a bad value that came from it", () => {
      write("agent:\n  max_iterations: 5\n");
      const found = problems({ KEEL_HTTP_PORT: "99999", KEEL_MAX_ITERATIONS: "-1" });
      expect(found).toHaveLength(2);
      expect(found[0]).toMatch(/^KEEL_MAX_ITERATIONS \(agent\.max_iterations\): /);
      expect(found[1]).toMatch(/^KEEL_HTTP_PORT \(http\.port\): /);
      expect(found.join("\n")).not.toContain("config.yaml");
    });

    it("reports file and environment problems together, and a YAML syntax error with its line", () => {
      write("model:\n  name: m\nagent: [unclosed\n");
      const found = problems({ KEEL_HTTP_PORT: "x" });
      expect(found[0]).toMatch(new RegExp(`^${file()}:\\d+: not valid YAML: `));
      expect(found.at(-1)).toMatch(/^KEEL_HTTP_PORT \(http\.port\): /);
    });

    it("explains how to write ${NAME} inside a flow map", () => {
      write("model: { base_url: http://127.0.0.1:9/v1, api_key: ${MODEL_KEY} }\n");
      const [first] = problems({ MODEL_KEY: "k" });
      expect(first).toMatch(new RegExp(`^${file()}:1: not valid YAML: `));
      expect(first).toContain('quote values that reference the environment: "${NAME}"');
      write('model: { base_url: http://127.0.0.1:9/v1, name: m, api_key: "${MODEL_KEY}" }\n');
      expect(load({ MODEL_KEY: "k" }).config.model.api_key).toBe("k");
    });

    it("substitutes ${NAME} in parsed values only: a value cannot change the file's structure", () => {
      write('model:\n  name: "${INJECT}"\n  base_url: http://127.0.0.1:9/v1\n');
      expect(load({ INJECT: "m\nagent:\n  max_iterations: 1" }).config.agent.max_iterations).toBe(
        90,
      );
    });

    it("a self-referencing alias is a configuration error, not a crash", () => {
      write("agent: &loop\n  max_iterations: *loop\n");
      const found = problems();
      expect(found[0]).toBe(
        `${file()}:2: agent.max_iterations: a YAML alias refers to the node that contains it (a cycle)`,
      );
      write("a: &x [*x]\n");
      expect(problems()[0]).toContain("a.0: a YAML alias refers to the node that contains it");
    });

    it("a non-loopback host set through the environment is blamed on the variable", () => {
      expect(problems({ KEEL_HTTP_HOST: "0.0.0.0" })).toEqual([
        expect.stringMatching(/^KEEL_HTTP_HOST: '0\.0\.0\.0' is not loopback/),
      ]);
    });
  });

  describe("lifecycle settings (docs/seed-map.md, seed 000)", () => {
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
      expect(warnings).toEqual([
        "Invalid restart_drain_timeout 'abc', using default 0s (KEEL_RESTART_DRAIN_TIMEOUT)",
      ]);
    });

    it("a negative drain timeout in the file is invalid too; a blank env value counts as unset", () => {
      write("agent:\n  restart_drain_timeout: -5\n");
      expect(load().warnings).toEqual([
        `Invalid restart_drain_timeout '-5', using default 0s (${join(dir.path, "config.yaml")}:2)`,
      ]);
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
      expect(warnings).toEqual([
        `Invalid busy_input_mode 'shout', using default interrupt (${join(dir.path, "config.yaml")}:2)`,
      ]);
    });
  });
});
