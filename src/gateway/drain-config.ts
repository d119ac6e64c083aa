/**
 * Parsing of the two lifecycle settings whose bad values warn instead of failing the start:
 * `agent.restart_drain_timeout` and `display.busy_input_mode`. Precedence is environment, then
 * config.yaml, then the default; an invalid value in the chosen source yields the default (not
 * the next source) with a warning naming the setting.
 */
import { BUSY_INPUT_MODES } from "../config/schema.js";

export type BusyInputMode = (typeof BUSY_INPUT_MODES)[number];

export const DEFAULT_DRAIN_TIMEOUT_SECONDS = 0;
export const DEFAULT_BUSY_INPUT_MODE: BusyInputMode = "interrupt";

export interface ParsedSetting<T> {
  value: T;
  /** e.g. `Invalid restart_drain_timeout 'abc', using default 0s`. */
  warning?: string;
  /** Where the value came from (an env var name, `config.yaml`, or `default`). */
  source: string;
}

/** True when a raw value counts as "not set" (absent or blank). */
function isUnset(raw: unknown): boolean {
  return raw === undefined || raw === null || (typeof raw === "string" && raw.trim() === "");
}

/**
 * Parses a drain timeout in seconds from a string (env) or number (YAML). Unset -> default;
 * non-numeric, infinite or negative -> default with a warning.
 */
export function parseDrainTimeout(raw: unknown, source: string): ParsedSetting<number> {
  if (isUnset(raw)) return { value: DEFAULT_DRAIN_TIMEOUT_SECONDS, source: "default" };
  const value =
    typeof raw === "number" ? raw : typeof raw === "string" ? Number(raw.trim()) : Number.NaN;
  if (!Number.isFinite(value) || value < 0) {
    return {
      value: DEFAULT_DRAIN_TIMEOUT_SECONDS,
      warning: `Invalid restart_drain_timeout '${String(raw)}', using default ${DEFAULT_DRAIN_TIMEOUT_SECONDS}s`,
      source,
    };
  }
  return { value, source };
}

/** Parses a busy input mode (case-insensitive). Unset -> default; unknown -> default with a warning. */
export function parseBusyInputMode(raw: unknown, source: string): ParsedSetting<BusyInputMode> {
  if (isUnset(raw)) return { value: DEFAULT_BUSY_INPUT_MODE, source: "default" };
  const text = typeof raw === "string" ? raw.trim().toLowerCase() : "";
  const mode = BUSY_INPUT_MODES.find((candidate) => candidate === text);
  if (mode === undefined) {
    return {
      value: DEFAULT_BUSY_INPUT_MODE,
      warning: `Invalid busy_input_mode '${String(raw)}', using default ${DEFAULT_BUSY_INPUT_MODE}`,
      source,
    };
  }
  return { value: mode, source };
}

/** Sources for one setting: the env var (name and raw value) and the config.yaml value. */
export interface SettingSources {
  envName: string;
  env: string | undefined;
  file: unknown;
}

/** Environment, then config.yaml, then default, for `restart_drain_timeout` (seconds). */
export function resolveDrainTimeout(sources: SettingSources): ParsedSetting<number> {
  if (!isUnset(sources.env)) return parseDrainTimeout(sources.env, sources.envName);
  return parseDrainTimeout(sources.file, "config.yaml");
}

/** Environment, then config.yaml, then default, for `busy_input_mode`. */
export function resolveBusyInputMode(sources: SettingSources): ParsedSetting<BusyInputMode> {
  if (!isUnset(sources.env)) return parseBusyInputMode(sources.env, sources.envName);
  return parseBusyInputMode(sources.file, "config.yaml");
}
