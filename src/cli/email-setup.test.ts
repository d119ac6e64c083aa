/**
 * `keel setup`'s email step and `keel doctor`'s email check, against a private Dovecot (IMAP)
 * and the test tree's SMTP server: each login tested as the gateway makes it, no password shown.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { type FakeOpenAI, startFakeOpenAI } from "../../test/fakes/openai-server.js";
import { runCliInProcess } from "../../test/helpers/cli-run.js";
import { freePort } from "../../test/helpers/gateway-process.js";
import { type MailWorld, startMailWorld } from "../../test/helpers/mail-world.js";
import { dovecotInstalled } from "../../test/helpers/private-dovecot.js";
import { createTempDir } from "../../test/helpers/temp-home.js";
import { loadConfig } from "../config/load-config.js";

describe.runIf(dovecotInstalled())("email in keel setup and keel doctor", () => {
  let dir: ReturnType<typeof createTempDir>;
  let world: MailWorld;
  let model: FakeOpenAI;

  beforeEach(async () => {
    dir = createTempDir();
    world = await startMailWorld();
    model = await startFakeOpenAI();
  });
  afterEach(async () => {
    await world.close();
    await model.close();
    dir.cleanup();
  });

  it("setup asks for the mailbox, tests both logins, and writes platforms.email", async () => {
    const run = (answers: string[]) =>
      runCliInProcess(["--home", dir.path, "setup", "--force"], {
        env: {},
        input: `${answers.join("\n")}\n`,
      });
    // Model url, key, name; Telegram, WhatsApp and Matrix skipped.
    const start = [model.baseUrl, "", "", "", "", ""];
    const mailbox = (password: string) => [
      world.keelAddress,
      "127.0.0.1",
      String(world.dovecot.imapPort),
      "keel",
      password,
    ];
    const refused = await run([...start, ...mailbox("wrong")]);
    expect(refused.code).toBe(1);
    expect(refused.text).toContain("refused the login of keel");
    expect(existsSync(join(dir.path, "config.yaml"))).toBe(false);
    const sending = ["127.0.0.1", String(world.smtp.port), world.smtp.user, world.smtp.password];
    const ok = await run([
      ...start,
      ...mailbox(world.dovecot.user("keel").password),
      ...sending,
      "y",
    ]);
    expect(ok.code).toBe(0);
    expect(ok.text).toContain("INBOX open, IDLE offered");
    expect(ok.text).toContain(`${world.smtp.user} logged in`);
    const { config } = loadConfig({ home: dir.path, env: {} });
    expect(config.platforms.email).toMatchObject({
      address: world.keelAddress,
      imap: { host: "127.0.0.1", port: world.dovecot.imapPort, user: "keel", folder: "Keel" },
      smtp: { host: "127.0.0.1", port: world.smtp.port, user: world.smtp.user },
      allowed_senders: [],
    });
  });

  it("doctor names a missing setting, a refused login, then passes", async () => {
    const env: Record<string, string> = { KEEL_HTTP_PORT: String(await freePort()) };
    const doctor = async () => {
      const run = await runCliInProcess(["--home", dir.path, "doctor"], { env });
      return { lines: run.out.filter((l) => l.includes(" email: ")), text: run.text };
    };
    expect((await doctor()).lines).toEqual(["✓ email: disabled"]);
    env.EMAIL_ADDRESS = world.keelAddress;
    expect((await doctor()).lines[0]).toMatch(/^✗ email: platforms\.email\.imap .* not set/);
    Object.assign(env, world.env([world.address("alice")]), { EMAIL_IMAP_PASSWORD: "hunter2" });
    const refused = await doctor();
    expect(refused.lines[0]).toMatch(/^✗ email: IMAP 127\.0\.0\.1:\d+ refused the login of keel/);
    expect(refused.text).not.toContain("hunter2");
    env.EMAIL_IMAP_PASSWORD = world.dovecot.user("keel").password;
    env.EMAIL_SMTP_PASSWORD = "wrong";
    expect((await doctor()).lines[0]).toMatch(/^✗ email: SMTP 127\.0\.0\.1:\d+ refused the login/);
    env.EMAIL_SMTP_PASSWORD = world.smtp.password;
    expect((await doctor()).lines[0]).toMatch(
      /^✓ email: IMAP .* keel logged in, INBOX open, IDLE offered; SMTP .* keel-smtp logged in$/,
    );
  });
});
