#!/usr/bin/env node
/** Process entry: argv to the CLI; the only place that touches signals and the exit code. */
import { runCli } from "./cli/cli.js";
import { processEnv } from "./config/load-config.js";

const code = await runCli(process.argv.slice(2), {
  out: (line) => process.stdout.write(`${line}\n`),
  err: (line) => process.stderr.write(`${line}\n`),
  env: processEnv(),
  stdin: process.stdin,
  write: (text) => process.stdout.write(text),
  stderrIsTTY: process.stderr.isTTY === true,
  onSignal: (signal, handler) => {
    process.on(signal, handler);
    return () => process.off(signal, handler);
  },
});
// Exit explicitly once output is flushed: a stray handle must never keep a stopped gateway alive.
process.stdout.write("", () => process.exit(code));
