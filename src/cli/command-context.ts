/** What every group of `keel` commands registers with. */
import type { CliIo } from "./io.js";
import type { GlobalOptions } from "./load.js";

export interface CommandContext {
  io: CliIo;
  /** The global options (`--home`), read when a command runs. */
  global(): GlobalOptions;
  /** Runs a command body; its exit code is the CLI's. */
  run(fn: () => Promise<number>): void;
}
