/** What a CLI command may touch: output lines, the environment, and process signals. */
import type { Env } from "../config/load-config.js";

export interface CliIo {
  out(line: string): void;
  err(line: string): void;
  env: Env;
  /** Standard input (for `keel chat`). */
  stdin: NodeJS.ReadableStream;
  /** Writes without a newline (streamed replies). */
  write(text: string): void;
  /** Standard error is a terminal (logs are then written for a person, not as JSON). */
  stderrIsTTY?: boolean;
  /**
   * Standard output is a regular file (a background gateway's `logs/gateway.out.log`, or a
   * redirect): the login link, which carries the control token, is then not written to it.
   */
  stdoutIsFile?: boolean;
  /** Subscribes to a process signal (only `gateway run` does); returns an unsubscribe. */
  onSignal(signal: NodeJS.Signals, handler: () => void): () => void;
}

/** Exit codes shared by every command (docs/operations.md, "Exit codes"). */
export { EXIT } from "../lib/exit-codes.js";
