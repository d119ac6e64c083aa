/** `keel doctor`: checks config, home folder, store, model endpoint, platform tokens, gateway. */
import { accessSync, constants, statSync } from "node:fs";
import { join } from "node:path";
import type { Config } from "../config/schema.js";
import { errorMessage } from "../lib/errors.js";
import { SqliteStore } from "../sessions/sqlite-store.js";
import { type CliIo, EXIT } from "./io.js";
import { type GlobalOptions, loadForCommand } from "./load.js";

type Check = { name: string; level: "ok" | "warn" | "fail"; detail: string };

export async function doctor(options: GlobalOptions, io: CliIo): Promise<number> {
  const loaded = loadForCommand(options, io);
  if (!loaded.ok) {
    io.out("✗ config: see the error above");
    return loaded.code;
  }
  const { config } = loaded.loaded;
  const checks: Check[] = [
    { name: "config", level: "ok", detail: `${join(config.home, "config.yaml")} (or defaults)` },
  ];
  checks.push(checkHome(config.home), checkStore(config.home));
  checks.push(await checkModel(config), await checkTelegram(config), await checkGateway(config));
  for (const c of checks)
    io.out(`${c.level === "ok" ? "✓" : c.level === "warn" ? "!" : "✗"} ${c.name}: ${c.detail}`);
  return checks.some((c) => c.level === "fail") ? EXIT.failure : EXIT.ok;
}

function checkHome(home: string): Check {
  try {
    accessSync(home, constants.W_OK);
    const mode = statSync(home).mode & 0o777;
    if (mode & 0o077)
      return {
        name: "home",
        level: "warn",
        detail: `${home} is mode ${mode.toString(8)}; run chmod 700 ${home}`,
      };
    return { name: "home", level: "ok", detail: home };
  } catch (err) {
    return { name: "home", level: "fail", detail: `${home} is not writable: ${errorMessage(err)}` };
  }
}

function checkStore(home: string): Check {
  try {
    const store = new SqliteStore(join(home, "state.db"));
    const version = store.schemaVersion();
    void store.close();
    return { name: "store", level: "ok", detail: `state.db schema v${version}` };
  } catch (err) {
    return {
      name: "store",
      level: "fail",
      detail: `state.db cannot be opened: ${errorMessage(err)}`,
    };
  }
}

async function checkModel(config: Config): Promise<Check> {
  const { base_url, name, api_key } = config.model;
  if (!base_url || !name) {
    return {
      name: "model",
      level: "warn",
      detail: "not configured: set model.base_url and model.name (OPENAI_BASE_URL, KEEL_MODEL)",
    };
  }
  try {
    const res = await fetch(`${base_url.replace(/\/$/, "")}/models`, {
      headers: api_key ? { authorization: `Bearer ${api_key}` } : {},
      signal: AbortSignal.timeout(5000),
    });
    if (res.status === 401 || res.status === 403)
      return {
        name: "model",
        level: "fail",
        detail: `${base_url} rejected the API key (${res.status})`,
      };
    return {
      name: "model",
      level: "ok",
      detail: `${base_url} answers (HTTP ${res.status}); model ${name}`,
    };
  } catch (err) {
    return {
      name: "model",
      level: "fail",
      detail: `${base_url} is unreachable: ${errorMessage(err)}`,
    };
  }
}

async function checkTelegram(config: Config): Promise<Check> {
  const { token, api_root } = config.platforms.telegram;
  if (!config.telegramEnabled || !token)
    return { name: "telegram", level: "ok", detail: "disabled" };
  try {
    const res = await fetch(`${api_root}/bot${token}/getMe`, { signal: AbortSignal.timeout(5000) });
    const body = (await res.json()) as {
      ok: boolean;
      result?: { username?: string };
      description?: string;
    };
    if (!body.ok)
      return {
        name: "telegram",
        level: "fail",
        detail: `token rejected: ${body.description ?? res.status}`,
      };
    return { name: "telegram", level: "ok", detail: `bot @${body.result?.username ?? "?"}` };
  } catch (err) {
    return {
      name: "telegram",
      level: "fail",
      detail: `${api_root} is unreachable: ${errorMessage(err)}`,
    };
  }
}

async function checkGateway(config: Config): Promise<Check> {
  const url = `http://${config.http.host}:${config.http.port}/readyz`;
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(2000) });
    return {
      name: "gateway",
      level: "ok",
      detail: `running at ${url.replace("/readyz", "")} (${res.status === 200 ? "ready" : "not ready"})`,
    };
  } catch {
    return {
      name: "gateway",
      level: "ok",
      detail: "not running (start it with `keel gateway start` or `npm start`)",
    };
  }
}
