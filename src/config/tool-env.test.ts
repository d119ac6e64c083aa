import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createTempDir } from "../../test/helpers/temp-home.js";
import { loadConfig } from "./load-config.js";
import { buildToolEnv, isSensitiveName } from "./tool-env.js";

const GATEWAY_ENV = {
  PATH: "/usr/bin:/bin",
  HOME: "/home/op",
  USER: "op",
  LOGNAME: "op",
  SHELL: "/bin/bash",
  LANG: "C.UTF-8",
  LC_ALL: "C.UTF-8",
  LC_TIME: "en_GB.UTF-8",
  TERM: "xterm",
  TZ: "UTC",
  TMPDIR: "/tmp",
  OPENAI_API_KEY: "sk-model",
  OPENAI_BASE_URL: "http://127.0.0.1:1/v1",
  TELEGRAM_BOT_TOKEN: "123:bot",
  KEEL_CONTROL_TOKEN: "control-token-value",
  KEEL_HOME: "/home/op/.keel",
  MY_SECRET: "s",
  AWS_SECRET_ACCESS_KEY: "aws",
  github_token: "gh",
  DB_PASSWORD: "pw",
  EDITOR: "vim",
  UNSET: undefined,
};

describe("buildToolEnv", () => {
  it("keeps only the basic names a shell needs", () => {
    expect(buildToolEnv(GATEWAY_ENV, [])).toEqual({
      PATH: "/usr/bin:/bin",
      HOME: "/home/op",
      USER: "op",
      LOGNAME: "op",
      SHELL: "/bin/bash",
      LANG: "C.UTF-8",
      LC_ALL: "C.UTF-8",
      LC_TIME: "en_GB.UTF-8",
      TERM: "xterm",
      TZ: "UTC",
      TMPDIR: "/tmp",
    });
  });

  it("adds the listed names, even secret-looking ones, and ignores listed names that are unset", () => {
    const env = buildToolEnv(GATEWAY_ENV, ["EDITOR", "MY_SECRET", "NOT_SET", "UNSET"]);
    expect(env.EDITOR).toBe("vim");
    expect(env.MY_SECRET).toBe("s");
    expect(env).not.toHaveProperty("NOT_SET");
    expect(env).not.toHaveProperty("UNSET");
    expect(env).not.toHaveProperty("AWS_SECRET_ACCESS_KEY");
  });

  it("never keeps a base-looking name that is a Keel setting or a credential", () => {
    expect(buildToolEnv({ LC_API_KEY: "x", LC_KEEL: "y" }, [])).toEqual({ LC_KEEL: "y" });
  });
});

describe("isSensitiveName", () => {
  it("matches Keel's settings and credential words in any case", () => {
    for (const name of [
      "KEEL_HOME",
      "OPENAI_BASE_URL",
      "TELEGRAM_API_ROOT",
      "DISCORD_API_ROOT",
      "github_token",
    ]) {
      expect(isSensitiveName(name)).toBe(true);
    }
    for (const name of ["ApiKey", "MY_SECRET", "db_password", "SSH_AUTH_SOCK_KEY"]) {
      expect(isSensitiveName(name)).toBe(true);
    }
    for (const name of ["PATH", "EDITOR", "LC_ALL", "KEELHAUL"]) {
      expect(isSensitiveName(name)).toBe(false);
    }
  });
});

describe("the loaded config's tool environment", () => {
  let dir: ReturnType<typeof createTempDir>;
  beforeEach(() => {
    dir = createTempDir();
  });
  afterEach(() => dir.cleanup());

  it("is built from the environment the config was loaded from, with agent.env_passthrough", () => {
    const env = { ...GATEWAY_ENV, KEEL_AGENT_ENV_PASSTHROUGH: "EDITOR, DB_PASSWORD" };
    const { config } = loadConfig({ home: dir.path, env });
    expect(config.agent.env_passthrough).toEqual(["EDITOR", "DB_PASSWORD"]);
    expect(config.toolEnv).toMatchObject({
      PATH: "/usr/bin:/bin",
      EDITOR: "vim",
      DB_PASSWORD: "pw",
    });
    for (const secret of [
      "OPENAI_API_KEY",
      "TELEGRAM_BOT_TOKEN",
      "KEEL_CONTROL_TOKEN",
      "MY_SECRET",
    ]) {
      expect(config.toolEnv).not.toHaveProperty(secret);
    }
  });

  it("reads agent.env_passthrough from config.yaml and rejects a name that is not a variable name", () => {
    writeFileSync(join(dir.path, "config.yaml"), "agent:\n  env_passthrough: [EDITOR]\n");
    expect(loadConfig({ home: dir.path, env: GATEWAY_ENV }).config.toolEnv.EDITOR).toBe("vim");
    writeFileSync(join(dir.path, "config.yaml"), "agent:\n  env_passthrough: ['A=B']\n");
    expect(() => loadConfig({ home: dir.path, env: GATEWAY_ENV })).toThrow(/env_passthrough/);
  });
});
