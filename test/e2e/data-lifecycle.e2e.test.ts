/**
 * The restore drill (issue 41) through the built CLI: a gateway talks on Telegram (the stand-in),
 * is backed up while it runs, talks on, stops; the backup is restored; the next gateway answers
 * the same chat with the history of the backup, and what came after it is gone (kept aside).
 */
import { readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { type FakeOpenAI, startFakeOpenAI } from "../fakes/openai-server.js";
import { type FakeTelegram, startFakeTelegram } from "../fakes/telegram-server.js";
import {
  freePort,
  type GatewayProcess,
  runKeel,
  startGatewayProcess,
} from "../helpers/gateway-process.js";
import { createTempDir } from "../helpers/temp-home.js";
import { waitFor } from "../helpers/wait-for.js";

const TOKEN = "123456:E2E-token";
const USER = 4242;
/** Five people in their own chats. */
const USERS = [4242, 4243, 4244, 4245, 4246];

describe("backup and restore (real processes)", () => {
  let home: ReturnType<typeof createTempDir>;
  let elsewhere: ReturnType<typeof createTempDir>;
  let telegram: FakeTelegram;
  let model: FakeOpenAI;
  let port: number;
  const spawned: GatewayProcess[] = [];

  beforeEach(async () => {
    home = createTempDir("keel-restore-e2e-");
    elsewhere = createTempDir("keel-backups-");
    telegram = await startFakeTelegram({ token: TOKEN });
    model = await startFakeOpenAI();
    port = await freePort();
  });

  afterEach(async () => {
    for (const gateway of spawned.splice(0)) await gateway.stop();
    await telegram.close();
    await model.close();
    home.cleanup();
    elsewhere.cleanup();
  });

  const env = {
    TELEGRAM_BOT_TOKEN: TOKEN,
    TELEGRAM_API_ROOT: "",
    TELEGRAM_ALLOWED_USERS: USERS.join(","),
    OPENAI_BASE_URL: "",
    KEEL_MODEL: "fake-model",
  };

  async function start(): Promise<GatewayProcess> {
    const gateway = await startGatewayProcess({
      home: home.path,
      port,
      env: { ...env, TELEGRAM_API_ROOT: telegram.apiRoot, OPENAI_BASE_URL: model.baseUrl },
    });
    spawned.push(gateway);
    await gateway.waitForReady(20_000);
    return gateway;
  }

  async function say(text: string, user = USER): Promise<void> {
    telegram.sendUserMessage({ chatId: user, userId: user, text: `echo: ${text}` });
    await waitFor(() => telegram.chatLog(user).some((e) => e.from === "bot" && e.text === text), {
      timeoutMs: 20_000,
      message: `reply "${text}"`,
    });
  }

  const keel = (...args: string[]) => runKeel({ home: home.path, args, timeoutMs: 60_000 });

  async function transcript(user = USER): Promise<string> {
    const list = await keel("sessions", "list", "--json");
    const sessions = JSON.parse(list.stdout) as { sessionId: string; key: string }[];
    const dm = sessions.find((s) => s.key.endsWith(`:dm:${user}`))!;
    return (await keel("sessions", "show", dm.sessionId)).stdout;
  }

  it("backs up a running gateway, restores into the stopped home, and the chat goes on", async () => {
    const first = await start();
    await Promise.all(USERS.map((u) => say(`before the backup ${u}`, u)));
    const backup = join(elsewhere.path, "drill.tar.gz");
    const startedAt = performance.now();
    // Under load: every chat talks while the copy is made.
    const load = Promise.all(USERS.map((u) => say(`during the backup ${u}`, u)));
    const made = await keel("backup", backup);
    const backupMs = performance.now() - startedAt;
    await load;
    expect(made.code, made.stderr).toBe(0);
    expect(made.stdout).toContain("OK (sqlite");

    const refused = await keel("restore", backup);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain("stop it first");

    await say("after the backup");
    await first.terminate();

    const restoreStarted = performance.now();
    const restored = await keel("restore", backup);
    const restoreMs = performance.now() - restoreStarted;
    expect(restored.code, restored.stderr).toBe(0);
    expect(readdirSync(home.path).some((f) => f.startsWith("restore-aside-"))).toBe(true);
    console.log(
      `restore drill: backup ${statSync(backup).size} bytes in ${Math.round(backupMs)} ms (CLI process included), restore in ${Math.round(restoreMs)} ms; ${restored.stdout.trim()}`,
    );

    await start();
    for (const u of USERS) {
      await say(`after the restore ${u}`, u);
      const history = await transcript(u);
      expect(history).toContain(`before the backup ${u}`);
      expect(history).toContain(`after the restore ${u}`);
      expect(history).not.toContain("after the backup");
    }
  }, 120_000);
});
