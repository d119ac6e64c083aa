/** Config loading for commands: a bad config is reported once, with exit code 78. */
import { fallbackConfig, type LoadedConfig, loadConfig } from "../config/load-config.js";
import type { Config } from "../config/schema.js";
import { ConfigError } from "../lib/errors.js";
import { readRuntimeStatus } from "../lifecycle/runtime-status.js";
import { type CliIo, EXIT } from "./io.js";

export interface GlobalOptions {
  home?: string;
}

export type ConfigResult = { ok: true; loaded: LoadedConfig } | { ok: false; code: number };

export function loadForCommand(options: GlobalOptions, io: CliIo): ConfigResult {
  try {
    const loaded = loadConfig({
      ...(options.home !== undefined && { home: options.home }),
      env: io.env,
    });
    for (const warning of loaded.warnings) io.err(`warning: ${warning}`);
    return { ok: true, loaded };
  } catch (err) {
    if (err instanceof ConfigError) {
      io.err(err.message);
      return { ok: false, code: EXIT.config };
    }
    throw err;
  }
}

/**
 * The config of a command that controls a running gateway without starting one (`status`,
 * `stop`, `drain`, `open`). A config that does not load must not lock the operator out of the
 * gateway running on the last good one: its errors are printed as a warning, and the command
 * works from the home's own files (the address and drain timeout the gateway recorded in
 * `gateway_state.json`, the `control_token` file). `broken` says which happened.
 */
export async function loadForControl(
  options: GlobalOptions,
  io: CliIo,
): Promise<{ config: Config; broken: boolean }> {
  try {
    const loaded = loadConfig({
      ...(options.home !== undefined && { home: options.home }),
      env: io.env,
    });
    for (const warning of loaded.warnings) io.err(`warning: ${warning}`);
    return { config: loaded.config, broken: false };
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    const base = fallbackConfig({
      ...(options.home !== undefined && { home: options.home }),
      env: io.env,
    });
    io.err(
      `warning: the config does not load (a gateway started now would refuse it); this command works from the files in ${base.home}:`,
    );
    for (const issue of err.issues) io.err(`  ${issue}`);
    const recorded = await readRuntimeStatus(base.home);
    const config: Config = {
      ...base,
      ...(recorded?.http && { http: { ...base.http, ...recorded.http } }),
      ...(recorded?.drain_timeout_seconds !== undefined && {
        agent: { ...base.agent, restart_drain_timeout: recorded.drain_timeout_seconds },
      }),
    };
    return { config, broken: true };
  }
}
