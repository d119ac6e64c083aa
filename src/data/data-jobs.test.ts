/** Scheduled backups (backup.every / keep / dir) and what a backup's config copy leaves out. */
import { readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import pino from "pino";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { createTempDir } from "../../test/helpers/temp-home.js";
import { waitFor } from "../../test/helpers/wait-for.js";
import { loadConfig } from "../config/load-config.js";
import { SqliteStore } from "../sessions/sqlite-store.js";
import { withoutSecrets } from "./config-secrets.js";
import { readBackupState, scheduledBackup, startDataJobs } from "./data-jobs.js";

let dir: ReturnType<typeof createTempDir>;
beforeEach(() => {
  dir = createTempDir();
});
afterEach(() => dir.cleanup());

describe("scheduled backups", () => {
  it("writes verified backups into backup.dir, keeps the newest backup.keep, records the last", async () => {
    writeFileSync(
      join(dir.path, "config.yaml"),
      "backup:\n  every: 3600\n  keep: 2\n  dir: saved\n",
    );
    const { config } = loadConfig({ home: dir.path, env: {} });
    const store = new SqliteStore(join(dir.path, "state.db"));
    await store.ensureSession("agent:main:telegram:dm:1", { platform: "telegram", chatId: "1" });
    let now = Date.parse("2026-11-28T00:00:00Z");
    const deps = { store, config, logger: pino({ level: "silent" }), now: () => now };
    for (let i = 0; i < 3; i += 1) {
      expect((await scheduledBackup(deps)).ok).toBe(true);
      now += 3_600_000;
    }
    await store.close();
    expect(readdirSync(join(dir.path, "saved")).sort()).toEqual([
      "keel-backup-2026-11-28T01-00-00Z.tar.gz",
      "keel-backup-2026-11-28T02-00-00Z.tar.gz",
    ]);
    expect(readBackupState(dir.path)).toMatchObject({
      ok: true,
      path: join(dir.path, "saved", "keel-backup-2026-11-28T02-00-00Z.tar.gz"),
    });
  });
});

describe("a backup's config.yaml", () => {
  it("drops secrets, keeps references to the environment and everything else", () => {
    const text = [
      "# my gateway",
      "model:",
      "  base_url: http://127.0.0.1:11434/v1",
      "  api_key: sk-SECRET1",
      "platforms:",
      "  telegram:",
      // biome-ignore lint/suspicious/noTemplateCurlyInString: a config.yaml reference to the environment
      "    token: ${TELEGRAM_BOT_TOKEN}",
      "    allowed_users: [1]",
      "  slack:",
      "    bot_token: xoxb-SECRET2",
      "mcp:",
      "  servers:",
      "    files:",
      "      command: srv",
      "      env:",
      "        GITHUB_PAT: SECRET3",
      "store:",
      "  url: postgres://keel:SECRET4@db:5432/keel",
      "",
    ].join("\n");
    const { text: kept, removed } = withoutSecrets(text);
    expect(kept).not.toMatch(/SECRET/);
    expect(kept).toContain("# my gateway");
    // biome-ignore lint/suspicious/noTemplateCurlyInString: a config.yaml reference to the environment
    expect(kept).toContain("${TELEGRAM_BOT_TOKEN}");
    expect(kept).toContain("allowed_users");
    expect(kept).toContain("postgres://keel@db:5432/keel");
    expect(removed).toEqual([
      "model.api_key",
      "platforms.slack.bot_token",
      "mcp.servers.files.env.GITHUB_PAT",
      "store.url (password)",
    ]);
  });
});

describe("the gateway's retention pass", () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it("runs a minute after start and then hourly, removing what retention.* says", async () => {
    writeFileSync(join(dir.path, "config.yaml"), "retention:\n  sessions_idle_days: 30\n");
    const { config } = loadConfig({ home: dir.path, env: {} });
    const old = Date.now() - 60 * 86_400_000;
    const seed = new SqliteStore(join(dir.path, "state.db"), { now: () => old });
    await seed.ensureSession("agent:main:telegram:dm:1", { platform: "telegram", chatId: "1" });
    await seed.close();
    const store = new SqliteStore(join(dir.path, "state.db"));
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
    const jobs = startDataJobs({ store, config, logger: pino({ level: "silent" }), now: Date.now });
    try {
      await vi.advanceTimersByTimeAsync(59_000);
      expect(await store.getSession("agent:main:telegram:dm:1")).not.toBeNull();
      await vi.advanceTimersByTimeAsync(1_000);
      vi.useRealTimers();
      await waitFor(async () => (await store.getSession("agent:main:telegram:dm:1")) === null, {
        timeoutMs: 5000,
        message: "the idle session pruned",
      });
    } finally {
      await jobs.stop();
      await store.close();
    }
  });
});
