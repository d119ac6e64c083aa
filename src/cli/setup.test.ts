/** `keel setup` through the real command line, against the stand-in model and Bot API servers. */
import { existsSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { startFakeMatrix } from "../../test/fakes/matrix-server.js";
import { type FakeOpenAI, startFakeOpenAI } from "../../test/fakes/openai-server.js";
import { type FakeTelegram, startFakeTelegram } from "../../test/fakes/telegram-server.js";
import { startFakeWhatsapp } from "../../test/fakes/whatsapp-server.js";
import { runCliInProcess } from "../../test/helpers/cli-run.js";
import { freePort } from "../../test/helpers/gateway-process.js";
import { createTempDir } from "../../test/helpers/temp-home.js";
import { loadConfig } from "../config/load-config.js";
import { defaultApprovalMode, describeApprovalMode } from "./setup.js";

let dir: ReturnType<typeof createTempDir>;
let model: FakeOpenAI;
let telegram: FakeTelegram;
beforeEach(async () => {
  dir = createTempDir();
  model = await startFakeOpenAI();
  telegram = await startFakeTelegram({ token: "555:bot" });
});
afterEach(async () => {
  await model.close();
  await telegram.close();
  dir.cleanup();
});

const configFile = () => join(dir.path, "config.yaml");
const setup = (args: string[], input?: string) =>
  runCliInProcess(["--home", dir.path, "setup", ...args], {
    env: { TELEGRAM_API_ROOT: telegram.apiRoot },
    ...(input !== undefined && { input }),
  });

describe("keel setup", () => {
  it("--yes tests the endpoint, warns about shell access, and writes a 0600 config that loads", async () => {
    const run = await setup(["--yes", "--model-url", model.baseUrl]);
    expect(run.code).toBe(0);
    expect(run.text).toMatch(/runs shell commands on this machine as \S+ \(uid \d+\)/);
    expect(run.text).toContain(`Approval mode: ${describeApprovalMode(defaultApprovalMode())}`);
    expect(model.requests).toHaveLength(1);
    expect(statSync(configFile()).mode & 0o777).toBe(0o600);
    const text = readFileSync(configFile(), "utf8");
    expect(text).toMatch(/^# Keel configuration/);
    const { config } = loadConfig({ home: dir.path, env: {} });
    expect(config.model).toMatchObject({ base_url: model.baseUrl, name: "fake-model" });
    expect(config.telegramEnabled).toBe(false);
  });

  it("never replaces an existing config.yaml with --yes unless --force", async () => {
    writeFileSync(configFile(), "agent:\n  max_iterations: 3\n");
    const refused = await setup(["--yes", "--model-url", model.baseUrl]);
    expect(refused.code).toBe(1);
    expect(refused.text).toContain("--force");
    expect(readFileSync(configFile(), "utf8")).toBe("agent:\n  max_iterations: 3\n");
    const forced = await setup(["--yes", "--force", "--model-url", model.baseUrl]);
    expect(forced.code).toBe(0);
    expect(loadConfig({ home: dir.path, env: {} }).config.model.name).toBe("fake-model");
  });

  it("asks before replacing an existing config.yaml interactively", async () => {
    writeFileSync(configFile(), "agent:\n  max_iterations: 3\n");
    const run = await setup([], "n\n");
    expect(run.code).toBe(0);
    expect(readFileSync(configFile(), "utf8")).toBe("agent:\n  max_iterations: 3\n");
  });

  it("asks for a WhatsApp number, tests its token and says where the webhook goes", async () => {
    const wa = await startFakeWhatsapp();
    try {
      const run = (answers: string[]) =>
        runCliInProcess(["--home", dir.path, "setup", "--force"], {
          env: { TELEGRAM_API_ROOT: telegram.apiRoot, WHATSAPP_API_ROOT: wa.apiRoot },
          input: `${answers.join("\n")}\n`,
        });
      const start = [model.baseUrl, "", "", ""];
      const refused = await run([...start, wa.phoneNumberId, "EAAG-wrong", "secret", "", "y"]);
      expect(refused.code).toBe(1);
      expect(refused.text).toContain("refused (HTTP 401, code 190)");
      expect(existsSync(configFile())).toBe(false);
      const ok = await run([
        ...start,
        wa.phoneNumberId,
        wa.accessToken,
        "secret",
        "vt-1",
        "",
        "",
        "y",
      ]);
      expect(ok.code).toBe(0);
      expect(ok.text).toContain("✓ WhatsApp: number +1 555 0100");
      expect(ok.text).toContain("/platforms/whatsapp/webhook");
      expect(ok.text).toContain("http.public_hosts");
      const { config } = loadConfig({ home: dir.path, env: {} });
      expect(config.platforms.whatsapp).toMatchObject({
        phone_number_id: wa.phoneNumberId,
        access_token: wa.accessToken,
        app_secret: "secret",
        verify_token: "vt-1",
        api_root: wa.apiRoot,
      });
      expect(config.telegramEnabled).toBe(false);
    } finally {
      await wa.close();
    }
  });

  it("asks for a Matrix bot account and tests its token with whoami", async () => {
    const mx = await startFakeMatrix();
    try {
      const run = (answers: string[]) =>
        runCliInProcess(["--home", dir.path, "setup", "--force"], {
          env: { TELEGRAM_API_ROOT: telegram.apiRoot },
          input: `${answers.join("\n")}\n`,
        });
      const start = [model.baseUrl, "", "", "", ""];
      const refused = await run([...start, mx.homeserver, mx.userId, "wrong", "y"]);
      expect(refused.code).toBe(1);
      expect(refused.text).toContain("M_UNKNOWN_TOKEN");
      expect(existsSync(configFile())).toBe(false);
      const ok = await run([...start, mx.homeserver, mx.userId, mx.accessToken, "", "y"]);
      expect(ok.code).toBe(0);
      expect(ok.text).toContain(`✓ Matrix: bot ${mx.userId}`);
      expect(ok.text).toContain("unencrypted room");
      const { config } = loadConfig({ home: dir.path, env: {} });
      expect(config.platforms.matrix).toMatchObject({
        homeserver: mx.homeserver,
        user_id: mx.userId,
        access_token: mx.accessToken,
      });
    } finally {
      await mx.close();
    }
  });

  it("asks plain questions, tests the Telegram token and explains pairing", async () => {
    const answers = [model.baseUrl, "", "", "555:bot", "", "", "", "y"].join("\n");
    const run = await setup([], `${answers}\n`);
    expect(run.code).toBe(0);
    expect(run.text).toContain("Model endpoint");
    expect(run.text).toMatch(/✓ Telegram: bot @/);
    expect(run.text).toContain("keel pairing approve CODE");
    const { config } = loadConfig({ home: dir.path, env: {} });
    expect(config.platforms.telegram).toMatchObject({
      token: "555:bot",
      api_root: telegram.apiRoot,
    });
    expect(config.telegramEnabled).toBe(true);
  });

  it("refuses to write a config for a model server that does not answer", async () => {
    const closed = await freePort();
    const run = await setup(["--yes", "--model-url", `http://127.0.0.1:${closed}/v1`]);
    expect(run.code).toBe(1);
    expect(run.text).toContain(`http://127.0.0.1:${closed}/v1/models is unreachable`);
    expect(existsSync(configFile())).toBe(false);
  });

  it("refuses a Telegram token that getMe rejects", async () => {
    const run = await setup(["--yes", "--model-url", model.baseUrl, "--telegram-token", "1:wrong"]);
    expect(run.code).toBe(1);
    expect(run.text).toMatch(/rejected the token/);
    expect(existsSync(configFile())).toBe(false);
  });
});

describe("the approval sentence of keel setup", () => {
  it("says plainly what each mode lets run", () => {
    expect(describeApprovalMode("off")).toMatch(/every command .* runs without asking/);
    expect(describeApprovalMode("dangerous")).toMatch(/look dangerous wait .*\/approve/);
    expect(describeApprovalMode("always")).toMatch(/every command waits/);
    expect(["off", "dangerous", "always"]).toContain(defaultApprovalMode());
  });
});
