/**
 * Runs the `keel` command line in this process (no build needed) with captured output: for
 * commands that finish on their own (`doctor`, `sessions`, `pairing`, `setup`, ...).
 */
import { Readable } from "node:stream";
import { runCli } from "../../src/cli/cli.js";

export interface CliRun {
  code: number;
  out: string[];
  err: string[];
  /** stdout and stderr together, for assertions that do not care which. */
  text: string;
}

export async function runCliInProcess(
  args: string[],
  options: { env?: Record<string, string>; input?: string } = {},
): Promise<CliRun> {
  const out: string[] = [];
  const err: string[] = [];
  const code = await runCli(args, {
    out: (line) => out.push(line),
    err: (line) => err.push(line),
    write: (text) => out.push(text),
    env: options.env ?? {},
    stdin: Readable.from([options.input ?? ""]),
    onSignal: () => () => {},
  });
  return { code, out, err, text: [...out, ...err].join("\n") };
}
