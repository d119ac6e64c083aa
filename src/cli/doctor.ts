/**
 * `keel doctor`: checks what a user gets wrong — config, home folder, store, model endpoint,
 * Telegram token, the Slack tokens, the listening port, the service manager — and prints ✓ / ⚠ / ✗ per check.
 * Exits 78 on a config error, 1 when any check failed, 0 otherwise (warnings included).
 */
import { accessSync, constants, mkdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import pino from "pino";
import { resolveSandbox, sandboxOptions } from "../agent/sandbox/sandbox.js";
import { type LoadedConfig, loadConfig, resolveHome } from "../config/load-config.js";
import type { Config } from "../config/schema.js";
import { describeStoreTarget, storeTarget } from "../config/store-target.js";
import { ConfigError, errorMessage } from "../lib/errors.js";
import { maskUrlCredentials } from "../lib/url-credentials.js";
import { probeMcpServers } from "../mcp/probe.js";
import type { ServiceDeps } from "../service/install.js";
import { serviceManagerProblem } from "../service/manager-check.js";
import { openCommandStore } from "../sessions/open-store.js";
import { probeEmail } from "./email-probe.js";
import {
  probeDiscord,
  probeMatrix,
  probeModels,
  probeSlack,
  probeTelegram,
  probeWhatsapp,
} from "./endpoint-checks.js";
import {
  findOwnGateway,
  gatewayBaseUrl,
  portInUse,
  probeReady,
  unconfirmedText,
} from "./gateway-probe.js";
import { type CliIo, EXIT } from "./io.js";
import type { GlobalOptions } from "./load.js";
import { findServiceTarget, machineServiceDeps } from "./service-target.js";

type Check = { name: string; level: "ok" | "warn" | "fail"; detail: string };

const MARK = { ok: "✓", warn: "⚠", fail: "✗" } as const;

export async function doctor(
  options: GlobalOptions,
  io: CliIo,
  serviceDeps: ServiceDeps = machineServiceDeps(),
): Promise<number> {
  // Details quote settings and endpoints' answers: a password inside a URL is never printed.
  const print = (c: Check) => io.out(maskUrlCredentials(`${MARK[c.level]} ${c.name}: ${c.detail}`));
  const homeOptions = { ...(options.home !== undefined && { home: options.home }), env: io.env };
  let loaded: LoadedConfig;
  try {
    loaded = loadConfig(homeOptions);
  } catch (err) {
    if (!(err instanceof ConfigError)) {
      // Loading creates the home folder and the control token: it fails when it is not writable.
      const home = resolveHome(homeOptions);
      print({ name: "home", level: "fail", detail: notWritable(home, err) });
      return EXIT.failure;
    }
    for (const issue of err.issues) print({ name: err.subject, level: "fail", detail: issue });
    io.err(
      err.subject === "home"
        ? "keel doctor: the Keel home is not safe to use; fix the lines marked ✗ above."
        : "keel doctor: the configuration is invalid; fix the lines marked ✗ above.",
    );
    return EXIT.config;
  }
  const { config, warnings } = loaded;
  const checks: Check[] =
    warnings.length > 0
      ? warnings.map((w) => ({ name: "config", level: "warn", detail: w }))
      : [
          {
            name: "config",
            level: "ok",
            detail: `${join(config.home, "config.yaml")} (or defaults)`,
          },
        ];
  checks.push(checkHome(config.home), await checkStore(config), checkSandbox(config));
  checks.push(await checkModel(config), await checkTelegram(config));
  checks.push(await checkSlack(config), await checkDiscord(config), await checkWhatsapp(config));
  checks.push(await checkMatrix(config), await checkEmail(config));
  checks.push(...(await checkMcp(config)), checkWeb(config));
  checks.push(await checkGateway(config), await checkService(config.home, serviceDeps));
  for (const c of checks) print(c);
  return checks.some((c) => c.level === "fail") ? EXIT.failure : EXIT.ok;
}

function notWritable(home: string, err: unknown): string {
  return `${home} is not writable: ${errorMessage(err)}; choose another folder with --home or KEEL_HOME`;
}

/** Writes and removes a probe file: permission bits alone say nothing for root or a read-only mount. */
function checkHome(home: string): Check {
  const probe = join(home, `.doctor-${process.pid}`);
  try {
    writeFileSync(probe, "");
    rmSync(probe, { force: true });
  } catch (err) {
    return { name: "home", level: "fail", detail: notWritable(home, err) };
  }
  const mode = statSync(home).mode & 0o777;
  if (mode & 0o077)
    return {
      name: "home",
      level: "warn",
      detail: `${home} is mode ${mode.toString(8)}; run chmod 700 ${home}`,
    };
  return { name: "home", level: "ok", detail: home };
}

/** Probes bubblewrap as the gateway does at start: are terminal commands sandboxed, and if not why. */
function checkSandbox(config: Config): Check {
  const state = resolveSandbox(sandboxOptions(config));
  const level =
    state.mode === "failed" ? "fail" : state.mode === "off" && state.warning ? "warn" : "ok";
  return { name: "sandbox", level, detail: state.detail };
}

/** Opens the store the config selects (running its migrations, as the gateway would). */
async function checkStore(config: Config): Promise<Check> {
  const target = storeTarget(config);
  const where = target.kind === "sqlite" ? "state.db" : describeStoreTarget(target);
  try {
    const store = await openCommandStore(target);
    try {
      return {
        name: "store",
        level: "ok",
        detail: `${where} schema v${await store.schemaVersion()}`,
      };
    } finally {
      await store.close();
    }
  } catch (err) {
    return {
      name: "store",
      level: "fail",
      // The Postgres store's own error already says where it is.
      detail:
        target.kind === "postgres"
          ? errorMessage(err)
          : `${where} cannot be opened: ${errorMessage(err)}`,
    };
  }
}

async function checkModel(config: Config): Promise<Check> {
  const { base_url, name, api_key } = config.model;
  if (!base_url || !name) {
    return {
      name: "model",
      level: "warn",
      detail:
        "not configured: run `keel setup`, or set model.base_url and model.name (OPENAI_BASE_URL, KEEL_MODEL)",
    };
  }
  const result = await probeModels(base_url, api_key, name);
  const level = result.ok ? "ok" : result.warnOnly ? "warn" : "fail";
  return { name: "model", level, detail: result.detail };
}

/** The web tools on offer, and whether the browser's Chromium can run at all. */
function checkWeb(config: Config): Check {
  const { search, browser, browser_executable, allow_hosts } = config.tools.web;
  const parts = ["web_fetch"];
  if (search) parts.push(`web_search (${search.provider})`);
  if (allow_hosts.length > 0) parts.push(`allow_hosts: ${allow_hosts.join(", ")}`);
  if (!browser) return { name: "web", level: "ok", detail: parts.join("; ") };
  try {
    accessSync(browser_executable, constants.X_OK);
  } catch {
    return {
      name: "web",
      level: "fail",
      detail: `tools.web.browser is on but ${browser_executable} cannot be run: install Chromium (Debian: apt install chromium) or set tools.web.browser_executable`,
    };
  }
  parts.push(`browser (${browser_executable})`);
  return { name: "web", level: "ok", detail: parts.join("; ") };
}

/** One line per MCP server: started and listed its tools, or why not (a fail: its tools are absent). */
async function checkMcp(config: Config): Promise<Check[]> {
  if (Object.keys(config.mcp.servers).length === 0) return [];
  mkdirSync(config.cwd, { recursive: true });
  const probes = await probeMcpServers(config, pino({ level: "silent" }), 10_000);
  return probes.map((p) => ({
    name: `mcp ${p.name}`,
    level: p.state === "connected" ? "ok" : "fail",
    detail: p.error ?? `${p.tools.length} tool(s): ${p.tools.map((t) => t.name).join(", ")}`,
  }));
}

async function checkTelegram(config: Config): Promise<Check> {
  const { token, api_root } = config.platforms.telegram;
  if (!config.telegramEnabled || !token)
    return { name: "telegram", level: "ok", detail: "disabled" };
  const result = await probeTelegram(api_root, token);
  return { name: "telegram", level: result.ok ? "ok" : "fail", detail: result.detail };
}

async function checkSlack(config: Config): Promise<Check> {
  const { app_token, bot_token, api_root } = config.platforms.slack;
  if (!app_token && !bot_token) return { name: "slack", level: "ok", detail: "disabled" };
  if (!app_token || !bot_token) {
    const missing = app_token
      ? "platforms.slack.bot_token (SLACK_BOT_TOKEN, xoxb-…)"
      : "platforms.slack.app_token (SLACK_APP_TOKEN, xapp-…)";
    return {
      name: "slack",
      level: "fail",
      detail: `${missing} is not set; Slack needs both tokens`,
    };
  }
  const result = await probeSlack(api_root, app_token, bot_token);
  return { name: "slack", level: result.ok ? "ok" : "fail", detail: result.detail };
}

/**
 * WhatsApp: every setting present, the token and number id accepted by the Graph API, and a
 * public name for the webhook (Meta reaches it only from the internet, over HTTPS).
 */
async function checkWhatsapp(config: Config): Promise<Check> {
  const w = config.platforms.whatsapp;
  if (!w.phone_number_id && !w.access_token) {
    return { name: "whatsapp", level: "ok", detail: "disabled" };
  }
  const missing = [
    ["phone_number_id", "WHATSAPP_PHONE_NUMBER_ID", w.phone_number_id],
    ["access_token", "WHATSAPP_ACCESS_TOKEN", w.access_token],
    ["app_secret", "WHATSAPP_APP_SECRET", w.app_secret],
    ["verify_token", "WHATSAPP_VERIFY_TOKEN", w.verify_token],
  ].filter(([, , value]) => !value);
  if (missing.length > 0) {
    const names = missing.map(([key, env]) => `platforms.whatsapp.${key} (${env})`).join(", ");
    return { name: "whatsapp", level: "fail", detail: `${names} not set; WhatsApp needs all four` };
  }
  const result = await probeWhatsapp(w.api_root, w.phone_number_id!, w.access_token!);
  if (!result.ok) return { name: "whatsapp", level: "fail", detail: result.detail };
  if (config.http.public_hosts.length === 0) {
    return {
      name: "whatsapp",
      level: "warn",
      detail: `${result.detail}; but Meta cannot reach the webhook: put Keel behind an HTTPS reverse proxy and list its name in http.public_hosts (KEEL_HTTP_PUBLIC_HOSTS)`,
    };
  }
  return {
    name: "whatsapp",
    level: "ok",
    detail: `${result.detail}, webhook https://${config.http.public_hosts[0]}/platforms/whatsapp/webhook`,
  };
}

/** Matrix: the three settings, and the token accepted as the configured account's. */
async function checkMatrix(config: Config): Promise<Check> {
  const m = config.platforms.matrix;
  if (!m.homeserver && !m.access_token) return { name: "matrix", level: "ok", detail: "disabled" };
  const missing = [
    ["homeserver", "MATRIX_HOMESERVER", m.homeserver],
    ["user_id", "MATRIX_USER_ID", m.user_id],
    ["access_token", "MATRIX_ACCESS_TOKEN", m.access_token],
  ].filter(([, , value]) => !value);
  if (missing.length > 0) {
    const names = missing.map(([key, env]) => `platforms.matrix.${key} (${env})`).join(", ");
    return { name: "matrix", level: "fail", detail: `${names} not set; Matrix needs all three` };
  }
  const result = await probeMatrix(m.homeserver!, m.user_id!, m.access_token!);
  return { name: "matrix", level: result.ok ? "ok" : "fail", detail: result.detail };
}

/** Email: the settings it needs, then the IMAP and SMTP logins as the gateway makes them. */
async function checkEmail(config: Config): Promise<Check> {
  const e = config.platforms.email;
  if (!e.imap && !e.smtp && !e.address) return { name: "email", level: "ok", detail: "disabled" };
  const missing = [
    ["imap", "EMAIL_IMAP_HOST, _PORT, _USER, _PASSWORD", e.imap],
    ["smtp", "EMAIL_SMTP_HOST, _PORT", e.smtp],
    ["address", "EMAIL_ADDRESS", e.address],
  ].filter(([, , value]) => !value);
  if (missing.length > 0) {
    const names = missing.map(([key, env]) => `platforms.email.${key} (${env})`).join(", ");
    return { name: "email", level: "fail", detail: `${names} not set; email needs all three` };
  }
  const result = await probeEmail(e.imap!, e.smtp!);
  const level = result.ok ? "ok" : result.warnOnly ? "warn" : "fail";
  const senders = e.allowed_senders.length + e.admin_senders.length;
  const who = senders > 0 ? "" : "; no allowed_senders yet: every sender gets a pairing code";
  return { name: "email", level, detail: `${result.detail}${result.ok ? who : ""}` };
}

/**
 * This home's gateway is found through its pid file and confirmed at its address (the control
 * API there reports its pid), never by the port alone; with none running, the configured port
 * must be free, or the next start fails.
 */
async function checkDiscord(config: Config): Promise<Check> {
  const { token, api_root } = config.platforms.discord;
  if (!token) return { name: "discord", level: "ok", detail: "disabled" };
  const result = await probeDiscord(api_root, token);
  return { name: "discord", level: result.ok ? "ok" : "fail", detail: result.detail };
}

async function checkGateway(config: Config): Promise<Check> {
  const url = gatewayBaseUrl(config.http);
  const own = await findOwnGateway(config);
  if (own.state === "running") {
    const ready = await probeReady(url);
    return {
      name: "gateway",
      level: "ok",
      detail: `running at ${url} (${ready ? "ready" : own.status.gateway_state}), pid ${own.record.pid}`,
    };
  }
  if (own.state === "unconfirmed") {
    return {
      name: "gateway",
      level: own.answered === null ? "warn" : "fail",
      detail: unconfirmedText(own, config.http),
    };
  }
  if (config.http.port === 0) return { name: "gateway", level: "ok", detail: "not running" };
  const busy = await portInUse(config.http.host, config.http.port);
  if (busy) {
    return {
      name: "gateway",
      level: "fail",
      detail: `not running, and ${config.http.host}:${config.http.port} is taken by another program (${busy}): stop it, or set http.port (KEEL_HTTP_PORT)`,
    };
  }
  return {
    name: "gateway",
    level: "ok",
    detail: "not running (start it with `keel gateway start` or `npm start`)",
  };
}

/** An installed unit for this home is only useful while its service manager answers. */
async function checkService(home: string, deps: ServiceDeps): Promise<Check> {
  const target = await findServiceTarget(home, deps).catch(() => null);
  if (!target) return { name: "service", level: "ok", detail: "none installed for this home" };
  const problem = await serviceManagerProblem(target.kind, target.system, deps);
  if (problem) return { name: "service", level: "fail", detail: `${target.path}: ${problem}` };
  return { name: "service", level: "ok", detail: `${target.path}` };
}
