/** `keel doctor` through the real command line, in-process, against a temporary home. */
import { mkdirSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { join } from "node:path";
import { Readable } from "node:stream";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { startFakeDiscord } from "../../test/fakes/discord-server.js";
import { startFakeMatrix } from "../../test/fakes/matrix-server.js";
import { startFakeOpenAI } from "../../test/fakes/openai-server.js";
import { startFakeSlack } from "../../test/fakes/slack-server.js";
import { startFakeTelegram } from "../../test/fakes/telegram-server.js";
import { startFakeWhatsapp } from "../../test/fakes/whatsapp-server.js";
import { runCliInProcess } from "../../test/helpers/cli-run.js";
import { freePort } from "../../test/helpers/gateway-process.js";
import { createTempDir } from "../../test/helpers/temp-home.js";
import type { RunResult } from "../service/install.js";
import { quoteSystemdWord } from "../service/systemd.js";
import { doctor as runDoctor } from "./doctor.js";

let dir: ReturnType<typeof createTempDir>;
let env: Record<string, string>;
beforeEach(async () => {
  dir = createTempDir();
  // A port nobody listens on, so the gateway check never meets another home's gateway.
  env = { KEEL_HTTP_PORT: String(await freePort()) };
});
afterEach(() => dir.cleanup());

const doctor = () => runCliInProcess(["--home", dir.path, "doctor"], { env });
const line = (out: string[], name: string) => out.filter((l) => l.includes(` ${name}: `));

describe("keel doctor", () => {
  it("shows an invalid lifecycle value as a warning, not ✓", async () => {
    writeFileSync(join(dir.path, "config.yaml"), "agent:\n  restart_drain_timeout: soon\n");
    const run = await doctor();
    expect(line(run.out, "config")).toEqual([
      `⚠ config: Invalid restart_drain_timeout 'soon', using default 0s (${join(dir.path, "config.yaml")}:2)`,
    ]);
    expect(run.out.some((l) => l.startsWith("✓ config"))).toBe(false);
  });

  it("lists every config error as ✗ and exits 78", async () => {
    writeFileSync(
      join(dir.path, "config.yaml"),
      "telegram:\n  token: x\nagent:\n  max_iterations: lots\n",
    );
    const run = await doctor();
    expect(run.code).toBe(78);
    const errors = line(run.out, "config");
    expect(errors).toHaveLength(2);
    expect(errors[0]).toMatch(
      /^✗ config: .*config\.yaml:1: telegram: unknown key \(did you mean platforms\.telegram\?\)$/,
    );
    expect(errors[1]).toMatch(/^✗ config: .*config\.yaml:4: agent\.max_iterations: /);
  });

  it("names the web tools on offer, and fails a browser whose Chromium is missing", async () => {
    writeFileSync(
      join(dir.path, "config.yaml"),
      "tools:\n  web:\n    search: { provider: searxng, url: 'http://127.0.0.1:9' }\n",
    );
    expect(line((await doctor()).out, "web")).toEqual(["✓ web: web_fetch; web_search (searxng)"]);
    const missing = join(dir.path, "no-chromium");
    writeFileSync(
      join(dir.path, "config.yaml"),
      `tools:\n  web:\n    browser: true\n    browser_executable: ${missing}\n`,
    );
    const run = await doctor();
    expect(line(run.out, "web")).toEqual([
      `✗ web: tools.web.browser is on but ${missing} cannot be run: install Chromium (Debian: apt install chromium) or set tools.web.browser_executable`,
    ]);
  });

  it("a self-referencing alias exits 78 like any other config error", async () => {
    writeFileSync(join(dir.path, "config.yaml"), "agent: &a\n  max_iterations: *a\n");
    const run = await doctor();
    expect(run.code).toBe(78);
    expect(run.text).toContain("a YAML alias refers to the node that contains it");
  });
});

describe("keel doctor finds what a new user gets wrong", () => {
  it("all ✓ and exit 0 with a reachable model and a free port", async () => {
    const fake = await startFakeOpenAI();
    try {
      Object.assign(env, { OPENAI_BASE_URL: fake.baseUrl, KEEL_MODEL: "fake-model" });
      const run = await doctor();
      expect(run.out.filter((l) => !l.startsWith("✓"))).toEqual([]);
      expect(run.code).toBe(0);
    } finally {
      await fake.close();
    }
  });

  it("a port taken by another program", async () => {
    const other: Server = createServer();
    await new Promise<void>((done) => other.listen(Number(env.KEEL_HTTP_PORT), "127.0.0.1", done));
    try {
      const run = await doctor();
      expect(line(run.out, "gateway")[0]).toMatch(
        new RegExp(
          `^✗ gateway: not running, and 127\\.0\\.0\\.1:${env.KEEL_HTTP_PORT} is taken by another program`,
        ),
      );
      expect(run.code).toBe(1);
    } finally {
      await new Promise((done) => other.close(done));
    }
  });

  it("a home folder that cannot be written", async () => {
    const file = join(dir.path, "a-file");
    writeFileSync(file, "");
    const run = await runCliInProcess(["--home", join(file, "home"), "doctor"], { env });
    expect(run.out[0]).toMatch(/^✗ home: .*a-file\/home is not writable: /);
    expect(run.code).toBe(1);
  });

  it("a model server that does not answer, with the URL it tried", async () => {
    const closed = await freePort();
    Object.assign(env, { OPENAI_BASE_URL: `http://127.0.0.1:${closed}/v1`, KEEL_MODEL: "m" });
    const run = await doctor();
    expect(line(run.out, "model")).toEqual([
      `✗ model: http://127.0.0.1:${closed}/v1/models is unreachable (ECONNREFUSED)`,
    ]);
    expect(run.code).toBe(1);
  });

  it("never prints a password written into model.base_url", async () => {
    const closed = await freePort();
    Object.assign(env, {
      OPENAI_BASE_URL: `http://keel:pa55word-in-url@127.0.0.1:${closed}/v1`,
      KEEL_MODEL: "m",
    });
    const run = await doctor();
    expect(run.text).not.toContain("pa55word-in-url");
    expect(line(run.out, "model")[0]).toContain(`http://keel:***@127.0.0.1:${closed}/v1`);
  });

  it("a base_url that is not the API root, and a model the server does not list", async () => {
    const fake = await startFakeOpenAI();
    try {
      Object.assign(env, {
        OPENAI_BASE_URL: fake.baseUrl.replace(/\/v1$/, ""),
        KEEL_MODEL: "fake-model",
      });
      const wrongRoot = await doctor();
      expect(line(wrongRoot.out, "model")[0]).toMatch(/^✗ model: .*\/models answered HTTP 404: /);
      expect(wrongRoot.code).toBe(1);
      Object.assign(env, { OPENAI_BASE_URL: fake.baseUrl, KEEL_MODEL: "gpt-nope" });
      const wrongName = await doctor();
      expect(line(wrongName.out, "model")[0]).toMatch(
        /^⚠ model: .*does not list model gpt-nope \(it lists fake-model\)/,
      );
      expect(wrongName.code).toBe(0);
    } finally {
      await fake.close();
    }
  });

  it("a Telegram token the Bot API rejects (getMe on platforms.telegram.api_root)", async () => {
    const telegram = await startFakeTelegram({ token: "111:right" });
    try {
      Object.assign(env, { TELEGRAM_BOT_TOKEN: "222:wrong", TELEGRAM_API_ROOT: telegram.apiRoot });
      const run = await doctor();
      expect(line(run.out, "telegram")[0]).toMatch(
        new RegExp(
          `^✗ telegram: ${telegram.apiRoot}/bot<token>/getMe rejected the token \\(Unauthorized\\)`,
        ),
      );
      expect(run.text).not.toContain("222:wrong");
      expect(run.code).toBe(1);
      env.TELEGRAM_BOT_TOKEN = "111:right";
      expect(line((await doctor()).out, "telegram")[0]).toMatch(/^✓ telegram: bot @/);
    } finally {
      await telegram.close();
    }
  });

  it("a Discord token the REST API rejects, then the bot and its identifies left", async () => {
    const discord = await startFakeDiscord({ token: "right-token" });
    try {
      Object.assign(env, { DISCORD_BOT_TOKEN: "wrong-token", DISCORD_API_ROOT: discord.apiRoot });
      const run = await doctor();
      expect(line(run.out, "discord")[0]).toBe(
        `✗ discord: ${discord.apiRoot}/v10/users/@me rejected the token (HTTP 401): check platforms.discord.token (DISCORD_BOT_TOKEN)`,
      );
      expect(run.text).not.toContain("wrong-token");
      expect(run.code).toBe(1);
      env.DISCORD_BOT_TOKEN = "right-token";
      expect(line((await doctor()).out, "discord")[0]).toBe(
        "✓ discord: bot keel-bot, 999/1000 identifies left today",
      );
    } finally {
      await discord.close();
    }
  });

  it("Slack tokens: a missing one, a rejected one, then both accepted", async () => {
    const slack = await startFakeSlack();
    try {
      Object.assign(env, { SLACK_BOT_TOKEN: slack.botToken, SLACK_API_ROOT: slack.apiRoot });
      const missing = await doctor();
      expect(line(missing.out, "slack")).toEqual([
        "✗ slack: platforms.slack.app_token (SLACK_APP_TOKEN, xapp-…) is not set; Slack needs both tokens",
      ]);
      env.SLACK_APP_TOKEN = "xapp-wrong";
      const rejected = await doctor();
      expect(line(rejected.out, "slack")[0]).toBe(
        `✗ slack: ${slack.apiRoot}apps.connections.open answered invalid_auth: check platforms.slack.app_token (SLACK_APP_TOKEN, scope connections:write) and that Socket Mode is on`,
      );
      expect(rejected.text).not.toContain("xapp-wrong");
      expect(rejected.code).toBe(1);
      env.SLACK_APP_TOKEN = slack.appToken;
      expect(line((await doctor()).out, "slack")).toEqual([
        "✓ slack: bot @keel on Keel, Socket Mode ready",
      ]);
    } finally {
      await slack.close();
    }
  });

  it("WhatsApp: missing settings, a refused token, then a good one (and the webhook's public name)", async () => {
    const wa = await startFakeWhatsapp();
    try {
      Object.assign(env, {
        WHATSAPP_PHONE_NUMBER_ID: wa.phoneNumberId,
        WHATSAPP_ACCESS_TOKEN: "EAAG-wrong",
        WHATSAPP_API_ROOT: wa.apiRoot,
      });
      expect(line((await doctor()).out, "whatsapp")).toEqual([
        "✗ whatsapp: platforms.whatsapp.app_secret (WHATSAPP_APP_SECRET), platforms.whatsapp.verify_token (WHATSAPP_VERIFY_TOKEN) not set; WhatsApp needs all four",
      ]);
      Object.assign(env, { WHATSAPP_APP_SECRET: "s", WHATSAPP_VERIFY_TOKEN: "v" });
      const rejected = await doctor();
      expect(line(rejected.out, "whatsapp")[0]).toBe(
        `✗ whatsapp: ${wa.apiRoot}v21.0/${wa.phoneNumberId} refused (HTTP 401, code 190): check platforms.whatsapp.access_token (WHATSAPP_ACCESS_TOKEN) and phone_number_id (WHATSAPP_PHONE_NUMBER_ID)`,
      );
      expect(rejected.text).not.toContain("EAAG-wrong");
      expect(rejected.code).toBe(1);
      env.WHATSAPP_ACCESS_TOKEN = wa.accessToken;
      expect(line((await doctor()).out, "whatsapp")[0]).toMatch(
        /^⚠ whatsapp: number \+1 555 0100; but Meta cannot reach the webhook: .*http\.public_hosts/,
      );
      env.KEEL_HTTP_PUBLIC_HOSTS = "keel.example.com";
      expect(line((await doctor()).out, "whatsapp")).toEqual([
        "✓ whatsapp: number +1 555 0100, webhook https://keel.example.com/platforms/whatsapp/webhook",
      ]);
    } finally {
      await wa.close();
    }
  });

  it("Matrix: a missing setting, a refused token, another account's token, then the right one", async () => {
    const mx = await startFakeMatrix();
    try {
      Object.assign(env, { MATRIX_HOMESERVER: mx.homeserver, MATRIX_ACCESS_TOKEN: "wrong" });
      expect(line((await doctor()).out, "matrix")).toEqual([
        "✗ matrix: platforms.matrix.user_id (MATRIX_USER_ID) not set; Matrix needs all three",
      ]);
      env.MATRIX_USER_ID = mx.userId;
      const refused = await doctor();
      expect(line(refused.out, "matrix")[0]).toBe(
        `✗ matrix: ${mx.homeserver}/_matrix/client/v3/account/whoami refused (HTTP 401 M_UNKNOWN_TOKEN): check platforms.matrix.access_token (MATRIX_ACCESS_TOKEN)`,
      );
      expect(refused.text).not.toContain("wrong");
      Object.assign(env, {
        MATRIX_ACCESS_TOKEN: mx.accessToken,
        MATRIX_USER_ID: "@other:fake.test",
      });
      expect(line((await doctor()).out, "matrix")[0]).toBe(
        `✗ matrix: the token belongs to ${mx.userId}, not platforms.matrix.user_id @other:fake.test (MATRIX_USER_ID)`,
      );
      env.MATRIX_USER_ID = mx.userId;
      expect(line((await doctor()).out, "matrix")).toEqual([`✓ matrix: bot ${mx.userId}`]);
    } finally {
      await mx.close();
    }
  });

  it("an installed user unit whose systemd user bus is missing", async () => {
    const osHome = join(dir.path, "os-home");
    const keelHome = join(dir.path, "keel");
    mkdirSync(join(osHome, ".config", "systemd", "user"), { recursive: true });
    writeFileSync(
      join(osHome, ".config", "systemd", "user", "keel-gateway.service"),
      `[Service]\nExecStart=/usr/bin/node /opt/keel/bin/keel.js gateway run --home ${quoteSystemdWord(keelHome, { dollar: true })}\n`,
    );
    const ran: string[][] = [];
    const run = async (argv: readonly string[]): Promise<RunResult> => {
      ran.push([...argv]);
      return { code: 1, stdout: "", stderr: "Failed to connect to bus: No medium found" };
    };
    const out: string[] = [];
    const code = await runDoctor(
      { home: keelHome },
      {
        out: (l) => out.push(l),
        err: () => {},
        write: () => {},
        env,
        stdin: Readable.from([]),
        onSignal: () => () => {},
      },
      { run, platform: "linux", homeDir: osHome, uid: 1000 },
    );
    expect(ran).toContainEqual(["systemctl", "--user", "show-environment"]);
    expect(line(out, "service")[0]).toMatch(
      /^✗ service: .*keel-gateway\.service: the systemd user manager is not reachable: no user D-Bus \(Failed to connect to bus: No medium found\).*`keel gateway start`/,
    );
    expect(code).toBe(1);
  });
});

describe("keel doctor says whether terminal commands run in the sandbox", () => {
  it("✓ workspace where bubblewrap works, with what is writable", async () => {
    const run = await doctor();
    expect(line(run.out, "sandbox")).toEqual([
      expect.stringMatching(/^✓ sandbox: workspace \(.*bwrap\): writable .*workspace; network on$/),
    ]);
  });

  it("⚠ off and why when bubblewrap is missing under `auto`; ✗ under `workspace`", async () => {
    env.KEEL_BWRAP = join(dir.path, "no-such-bwrap");
    const auto = await doctor();
    expect(line(auto.out, "sandbox")).toEqual([
      expect.stringMatching(
        /^⚠ sandbox: off: bubblewrap is not usable \(.*no-such-bwrap was not found\), so terminal commands run unconfined/,
      ),
    ]);
    writeFileSync(join(dir.path, "config.yaml"), "tools:\n  sandbox: workspace\n");
    const strict = await doctor();
    expect(line(strict.out, "sandbox")).toEqual([
      expect.stringMatching(/^✗ sandbox: tools\.sandbox is workspace but bubblewrap is not usable/),
    ]);
    expect(strict.code).toBe(1);
  });

  it("✓ off when the config says so", async () => {
    writeFileSync(join(dir.path, "config.yaml"), "tools:\n  sandbox: off\n");
    expect(line((await doctor()).out, "sandbox")).toEqual([
      "✓ sandbox: off (tools.sandbox: off): commands run unconfined",
    ]);
  });
});
