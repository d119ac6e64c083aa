/** Config loading for commands: a bad config is reported once, with exit code 78. */
import { type LoadedConfig, loadConfig } from "../config/load-config.js";
import { ConfigError } from "../lib/errors.js";
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
