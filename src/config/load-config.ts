/**
 * Loads the configuration: built-in defaults < config.yaml < environment. Returns a frozen
 * Config or throws ConfigError listing every problem with its key and the file.
 */
import { randomBytes } from "node:crypto";
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { homedir } from "node:os";
import { isAbsolute, join, resolve } from "node:path";
import { parse as parseYaml } from "yaml";
import type { z } from "zod";
import { ConfigError } from "../lib/errors.js";
import { coerceEnvValue, ENV_BINDINGS } from "./env-map.js";
import { type Config, ConfigSchema } from "./schema.js";

export type Env = Readonly<Record<string, string | undefined>>;

export interface LoadConfigOptions {
  /** `--home DIR`; wins over KEEL_HOME. */
  home?: string;
  env: Env;
}

export interface LoadedConfig {
  config: Config;
  /** Non-fatal problems (invalid lifecycle settings fall back to their default). */
  warnings: string[];
}

/** Lifecycle settings that warn and use their default when invalid, as hermes-agent does. */
const LENIENT_KEYS: readonly { path: [string, string]; name: string; unit: string }[] = [
  { path: ["agent", "restart_drain_timeout"], name: "restart_drain_timeout", unit: "s" },
  { path: ["agent", "auto_resume_freshness"], name: "auto_resume_freshness", unit: "s" },
  { path: ["display", "busy_input_mode"], name: "busy_input_mode", unit: "" },
];

/** The process environment; the only sanctioned read of process.env in Keel. */
export function processEnv(): Env {
  return process.env;
}

/** Resolves the Keel home folder: flag, then KEEL_HOME, then ~/.keel. */
export function resolveHome(options: LoadConfigOptions): string {
  const raw = options.home ?? options.env.KEEL_HOME ?? join(homedir(), ".keel");
  return resolve(raw);
}

export function loadConfig(options: LoadConfigOptions): LoadedConfig {
  const home = resolveHome(options);
  mkdirSync(home, { recursive: true, mode: 0o700 });
  const file = join(home, "config.yaml");
  const fromFile = readConfigFile(file, options.env);
  const merged = applyEnv(fromFile, options.env);
  const warnings = relaxLifecycleKeys(merged);
  const parsed = ConfigSchema.safeParse(merged);
  if (!parsed.success) {
    throw new ConfigError(file, parsed.error.issues.map(describeIssue));
  }
  const p = parsed.data;
  const cwd = p.agent.cwd ? resolvePath(home, p.agent.cwd) : join(home, "workspace");
  const config: Config = {
    ...p,
    home,
    cwd,
    controlToken: p.control.token ?? readOrCreateControlToken(home),
    telegramEnabled: p.platforms.telegram.enabled ?? p.platforms.telegram.token !== undefined,
    crashPoint: options.env.KEEL_CRASH_POINT || undefined,
  };
  checkExposure(config, file);
  return { config: deepFreeze(config), warnings };
}

function readConfigFile(file: string, env: Env): Record<string, unknown> {
  if (!existsSync(file)) return {};
  let doc: unknown;
  try {
    doc = parseYaml(readFileSync(file, "utf8"));
  } catch (err) {
    throw new ConfigError(file, [`not valid YAML: ${(err as Error).message.split("\n")[0]}`]);
  }
  if (doc === null || doc === undefined) return {};
  if (typeof doc !== "object" || Array.isArray(doc)) {
    throw new ConfigError(file, [
      "the top level must be a mapping of sections (model, agent, ...)",
    ]);
  }
  const missing: string[] = [];
  const substituted = substituteEnv(doc, env, [], missing) as Record<string, unknown>;
  if (missing.length > 0) throw new ConfigError(file, missing);
  return substituted;
}

/** Replaces `${NAME}` in string values with the environment's value. */
function substituteEnv(value: unknown, env: Env, path: string[], missing: string[]): unknown {
  if (typeof value === "string") {
    return value.replace(/\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g, (_, name: string) => {
      const v = env[name];
      if (v === undefined)
        missing.push(`${path.join(".")}: references \${${name}}, which is not set`);
      return v ?? "";
    });
  }
  if (Array.isArray(value))
    return value.map((v, i) => substituteEnv(v, env, [...path, String(i)], missing));
  if (value && typeof value === "object") {
    return Object.fromEntries(
      Object.entries(value).map(([k, v]) => [k, substituteEnv(v, env, [...path, k], missing)]),
    );
  }
  return value;
}

function applyEnv(base: Record<string, unknown>, env: Env): Record<string, unknown> {
  const out = structuredClone(base);
  for (const binding of ENV_BINDINGS) {
    const raw = env[binding.env];
    if (raw === undefined || raw === "") continue;
    setPath(out, binding.path, coerceEnvValue(raw, binding.kind));
  }
  return out;
}

function setPath(obj: Record<string, unknown>, path: readonly string[], value: unknown): void {
  let node = obj;
  for (const key of path.slice(0, -1)) {
    const next = node[key];
    if (!next || typeof next !== "object" || Array.isArray(next)) node[key] = {};
    node = node[key] as Record<string, unknown>;
  }
  node[path[path.length - 1]!] = value;
}

function relaxLifecycleKeys(merged: Record<string, unknown>): string[] {
  const warnings: string[] = [];
  const defaults = ConfigSchema.parse({}) as unknown as Record<string, Record<string, unknown>>;
  for (const { path, name, unit } of LENIENT_KEYS) {
    const section = merged[path[0]];
    if (!section || typeof section !== "object") continue;
    const record = section as Record<string, unknown>;
    if (!(path[1] in record)) continue;
    const probe = ConfigSchema.safeParse({ [path[0]]: { [path[1]]: record[path[1]] } });
    if (probe.success) continue;
    const fallback = defaults[path[0]]?.[path[1]];
    warnings.push(
      `Invalid ${name} '${String(record[path[1]])}', using default ${String(fallback)}${unit}`,
    );
    delete record[path[1]];
  }
  return warnings;
}

function describeIssue(issue: z.core.$ZodIssue): string {
  const key = issue.path.join(".") || "(top level)";
  if (issue.code === "unrecognized_keys") {
    const prefix = issue.path.length > 0 ? `${issue.path.join(".")}.` : "";
    return `${issue.keys.map((k) => prefix + k).join(", ")}: unknown key`;
  }
  return `${key}: ${issue.message}`;
}

function resolvePath(home: string, p: string): string {
  return isAbsolute(p) ? p : resolve(home, p);
}

function readOrCreateControlToken(home: string): string {
  const file = join(home, "control_token");
  if (existsSync(file)) {
    const token = readFileSync(file, "utf8").trim();
    if (token.length >= 16) return token;
  }
  const token = randomBytes(24).toString("base64url");
  writeFileSync(file, `${token}\n`, { mode: 0o600 });
  chmodSync(file, 0o600);
  return token;
}

const LOOPBACK_HOSTS = new Set(["127.0.0.1", "::1", "localhost"]);

export function isLoopbackHost(host: string): boolean {
  return LOOPBACK_HOSTS.has(host) || host.startsWith("127.");
}

/** A gateway reachable from the network needs both secrets set on purpose. */
function checkExposure(config: Config, file: string): void {
  if (isLoopbackHost(config.http.host)) return;
  const missing: string[] = [];
  if (!config.platforms.api.key) missing.push("platforms.api.key (KEEL_API_KEY)");
  if (!config.control.token) missing.push("control.token (KEEL_CONTROL_TOKEN)");
  if (missing.length > 0) {
    throw new ConfigError(file, [
      `http.host: '${config.http.host}' is not loopback; set ${missing.join(" and ")} before exposing the gateway`,
    ]);
  }
}

function deepFreeze<T>(value: T): T {
  if (value && typeof value === "object") {
    for (const v of Object.values(value)) deepFreeze(v);
    Object.freeze(value);
  }
  return value;
}
