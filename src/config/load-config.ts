/**
 * Loads the configuration: built-in defaults < config.yaml < environment. Returns a frozen
 * Config or throws ConfigError listing every problem at once, each with its key and where it
 * came from (the file and line, or the environment variable).
 */

import { randomBytes } from "node:crypto";
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { homedir } from "node:os";
import { isAbsolute, join, resolve } from "node:path";
import type { z } from "zod";
import { ConfigError } from "../lib/errors.js";
import { isLoopback } from "../lib/net.js";
import { coerceEnvValue, ENV_BINDINGS } from "./env-map.js";
import { controlTokenProblem, currentOwner, type HomeOwner, homeProblems } from "./home-safety.js";
import { suggestKey, suggestName } from "./key-suggest.js";
import { type Config, ConfigSchema, type ParsedConfig } from "./schema.js";
import { storeUrlWarning } from "./store-target.js";
import { buildToolEnv } from "./tool-env.js";
import { parseYamlSource } from "./yaml-source.js";

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

/**
 * Lifecycle settings that warn and use their default when invalid: a typo in a drain timeout must
 * not keep a gateway from restarting (docs/operations.md, `keel doctor`).
 */
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
  // Before anything in the home is read: a planted config.yaml names commands to run.
  const owner = currentOwner();
  const unsafe = owner ? homeProblems(home, owner) : [];
  if (unsafe.length > 0) throw new ConfigError(null, unsafe, "home");
  const file = join(home, "config.yaml");
  const source = readConfigFile(file, options.env);
  const { merged, envOf } = applyEnv(source.data, options.env);
  const warnings = relaxLifecycleKeys(merged, (path) => envOf(path) ?? source.where(path));
  warnings.push(...misspeltVariables(options.env));
  const problems = [...source.problems];
  const parsed = ConfigSchema.safeParse(merged);
  if (!parsed.success) {
    for (const issue of parsed.error.issues) problems.push(...describeIssue(issue, source, envOf));
  }
  if (problems.length > 0 || !parsed.success)
    throw new ConfigError(null, inFileOrder(problems, file));
  const p = parsed.data;
  const exposure = checkExposure(p, source, envOf);
  if (exposure.length > 0) throw new ConfigError(null, exposure);
  const storeWarning = storeUrlWarning(p.store.url);
  if (storeWarning) warnings.push(storeWarning);
  const cwd = p.agent.cwd ? resolvePath(home, p.agent.cwd) : join(home, "workspace");
  const config: Config = {
    ...p,
    home,
    cwd,
    controlToken: p.control.token ?? readOrCreateControlToken(home, owner),
    telegramEnabled: p.platforms.telegram.enabled ?? p.platforms.telegram.token !== undefined,
    toolEnv: buildToolEnv(options.env, p.agent.env_passthrough),
    bwrapProgram: options.env.KEEL_BWRAP || "bwrap",
    crashPoint: options.env.KEEL_CRASH_POINT || undefined,
  };
  return { config: deepFreeze(config), warnings };
}

/**
 * The settings a command that only controls a running gateway falls back to when the config
 * cannot be loaded (an operator must still be able to stop the gateway a typo would not let
 * start again): the defaults with the environment's overrides where they are valid, the home,
 * and the control token (`KEEL_CONTROL_TOKEN`, else the home's `control_token`, else none). The
 * caller takes the address from what the running gateway recorded. Never creates a token.
 */
export function fallbackConfig(options: LoadConfigOptions): Config {
  const home = resolveHome(options);
  const fromEnv = ConfigSchema.safeParse(applyEnv({}, options.env).merged);
  const p = fromEnv.success ? fromEnv.data : ConfigSchema.parse({});
  const config: Config = {
    ...p,
    home,
    cwd: join(home, "workspace"),
    controlToken: p.control.token ?? readControlToken(home) ?? "",
    telegramEnabled: false,
    toolEnv: buildToolEnv(options.env, []),
    bwrapProgram: options.env.KEEL_BWRAP || "bwrap",
    crashPoint: undefined,
  };
  return deepFreeze(config);
}

function readControlToken(home: string): string | null {
  try {
    const token = readFileSync(join(home, "control_token"), "utf8").trim();
    return token.length >= 16 ? token : null;
  } catch {
    return null;
  }
}

/** The file's problems by line, then those from environment variables. */
function inFileOrder(problems: string[], file: string): string[] {
  const line = (p: string) =>
    p.startsWith(file) ? Number(/^:(\d+):/.exec(p.slice(file.length))?.[1] ?? 0) : Infinity;
  return problems
    .map((p, i) => ({ p, i, line: line(p) }))
    .sort((a, b) => a.line - b.line || a.i - b.i)
    .map((x) => x.p);
}

type Path = readonly (string | number)[];

/** The file's data with `${NAME}` substituted, and every problem found on the way. */
interface FileSource {
  data: Record<string, unknown>;
  where(path: Path): string;
  problems: string[];
}

function readConfigFile(file: string, env: Env): FileSource {
  if (!existsSync(file)) return { data: {}, where: () => file, problems: [] };
  const yaml = parseYamlSource(file, readFileSync(file, "utf8"));
  const { data: doc, where, problems } = yaml;
  if (problems.length > 0 || doc === null || doc === undefined) {
    return { data: {}, where, problems };
  }
  if (typeof doc !== "object" || Array.isArray(doc)) {
    return {
      data: {},
      where,
      problems: [`${file}: the top level must be a mapping of sections (model, agent, ...)`],
    };
  }
  const found: string[] = [];
  const data = substituteEnv(doc, env, [], new Set(), (path, text) =>
    found.push(`${where(path)}: ${path.join(".")}: ${text}`),
  ) as Record<string, unknown>;
  return { data, where, problems: found };
}

/**
 * Replaces `${NAME}` in the parsed string values (never in the raw text, so a value can never
 * change the file's structure) and cuts cycles that a self-referencing alias creates.
 */
function substituteEnv(
  value: unknown,
  env: Env,
  path: string[],
  ancestors: Set<object>,
  report: (path: string[], text: string) => void,
): unknown {
  if (typeof value === "string") {
    return value.replace(/\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g, (_, name: string) => {
      const v = env[name];
      if (v === undefined) report(path, `references \${${name}}, which is not set`);
      return v ?? "";
    });
  }
  if (!value || typeof value !== "object") return value;
  if (ancestors.has(value)) {
    report(path, "a YAML alias refers to the node that contains it (a cycle)");
    return null;
  }
  ancestors.add(value);
  const out = Array.isArray(value)
    ? value.map((v, i) => substituteEnv(v, env, [...path, String(i)], ancestors, report))
    : Object.fromEntries(
        Object.entries(value).map(([k, v]) => [
          k,
          substituteEnv(v, env, [...path, k], ancestors, report),
        ]),
      );
  ancestors.delete(value);
  return out;
}

/** Environment overrides on top of the file, remembering which variable set which key. */
function applyEnv(
  base: Record<string, unknown>,
  env: Env,
): { merged: Record<string, unknown>; envOf: (path: Path) => string | null } {
  const out = structuredClone(base);
  const applied: { env: string; path: readonly string[] }[] = [];
  for (const binding of ENV_BINDINGS) {
    const raw = env[binding.env];
    if (raw === undefined || raw === "") continue;
    setPath(out, binding.path, coerceEnvValue(raw, binding.kind));
    applied.push(binding);
  }
  const envOf = (path: Path) =>
    applied.find((b) => b.path.every((segment, i) => String(path[i]) === segment))?.env ?? null;
  return { merged: out, envOf };
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

/**
 * The lifecycle keys' rule: an invalid value warns (in the seeds' words, then where it came
 * from: the variable or the file's line) and the default is used.
 */
function relaxLifecycleKeys(
  merged: Record<string, unknown>,
  origin: (path: Path) => string,
): string[] {
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
      `Invalid ${name} '${String(record[path[1]])}', using default ${String(fallback)}${unit} (${origin(path)})`,
    );
    delete record[path[1]];
  }
  return warnings;
}

/**
 * `KEEL_*` variables Keel reads besides the config bindings (the home, the crash-point harness,
 * the bubblewrap program).
 * Any other `KEEL_` name close to a known one is probably a misspelling that silently does
 * nothing, so it gets a warning with the name it resembles; names close to nothing (a user's own
 * `KEEL_SOMETHING`) are left alone.
 */
const OTHER_KEEL_VARIABLES = ["KEEL_HOME", "KEEL_CRASH_POINT", "KEEL_BWRAP"];

function misspeltVariables(env: Env): string[] {
  const known = [...ENV_BINDINGS.map((b) => b.env), ...OTHER_KEEL_VARIABLES];
  const warnings: string[] = [];
  for (const name of Object.keys(env)) {
    if (!name.startsWith("KEEL_") || known.includes(name)) continue;
    const suggestion = suggestName(name, known);
    if (suggestion) {
      warnings.push(`${name} is not a Keel setting and is ignored (did you mean ${suggestion}?)`);
    }
  }
  return warnings;
}

/** One line per problem, located in the variable that set it or the file's line. */
function describeIssue(
  issue: z.core.$ZodIssue,
  source: FileSource,
  envOf: (path: Path) => string | null,
): string[] {
  const locate = (path: Path) => {
    const variable = envOf(path);
    return variable
      ? `${variable} (${path.join(".")})`
      : `${source.where(path)}: ${path.join(".")}`;
  };
  if (issue.code === "unrecognized_keys") {
    const parent = issue.path.map(String);
    return issue.keys.map((key) => {
      const suggestion = suggestKey(parent, key);
      return `${locate([...parent, key])}: unknown key${suggestion ? ` (did you mean ${suggestion}?)` : ""}`;
    });
  }
  if (issue.path.length === 0) return [`${source.where([])}: (top level): ${issue.message}`];
  return [`${locate(issue.path as Path)}: ${issue.message}`];
}

function resolvePath(home: string, p: string): string {
  return isAbsolute(p) ? p : resolve(home, p);
}

function readOrCreateControlToken(home: string, owner: HomeOwner | null): string {
  const file = join(home, "control_token");
  const problem = owner ? controlTokenProblem(file, owner) : null;
  if (problem) throw new ConfigError(null, [problem], "home");
  if (existsSync(file)) {
    const token = readFileSync(file, "utf8").trim();
    if (token.length >= 16) return token;
  }
  const token = randomBytes(24).toString("base64url");
  writeFileSync(file, `${token}\n`, { mode: 0o600 });
  chmodSync(file, 0o600);
  return token;
}

/**
 * A gateway reachable from the network needs both secrets set on purpose, and the Host names it
 * answers to (the Host check of control/http-auth.ts refuses every other name).
 */
function checkExposure(
  config: ParsedConfig,
  source: FileSource,
  envOf: (path: Path) => string | null,
): string[] {
  if (isLoopback(config.http.host)) return [];
  const missing: string[] = [];
  if (config.http.public_hosts.length === 0)
    missing.push("http.public_hosts (KEEL_HTTP_PUBLIC_HOSTS)");
  if (!config.platforms.api.key) missing.push("platforms.api.key (KEEL_API_KEY)");
  if (!config.control.token) missing.push("control.token (KEEL_CONTROL_TOKEN)");
  if (missing.length === 0) return [];
  const path = ["http", "host"];
  const where = envOf(path) ?? `${source.where(path)}: http.host`;
  return [
    `${where}: '${config.http.host}' is not loopback; set ${missing.join(" and ")} before exposing the gateway`,
  ];
}

function deepFreeze<T>(value: T): T {
  if (value && typeof value === "object") {
    for (const v of Object.values(value)) deepFreeze(v);
    Object.freeze(value);
  }
  return value;
}
