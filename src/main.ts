#!/usr/bin/env node
/** Process entry: argv to the CLI; the only place that touches signals and the exit code. */
import { fstatSync } from "node:fs";
import { runCli } from "./cli/cli.js";
import { processEnv } from "./config/load-config.js";

const argv = process.argv.slice(2);
// The reader of our output went away (`keel sessions list | head -1`): stop quietly with 0, as
// the reader asked for no more, instead of dying on an unhandled EPIPE with a stack trace. A
// foreground gateway keeps running without its terminal output.
const gatewayRun = argv.some((arg, i) => arg === "gateway" && argv[i + 1] === "run");
for (const stream of [process.stdout, process.stderr]) {
  stream.on("error", (err: NodeJS.ErrnoException) => {
    if (err.code !== "EPIPE" && err.code !== "ERR_STREAM_DESTROYED") throw err;
    if (!gatewayRun) process.exit(0);
  });
}

const code = await runCli(argv, {
  out: (line) => process.stdout.write(`${line}\n`),
  err: (line) => process.stderr.write(`${line}\n`),
  env: processEnv(),
  stdin: process.stdin,
  write: (text) => process.stdout.write(text),
  stderrIsTTY: process.stderr.isTTY === true,
  stdoutIsFile: stdoutIsFile(),
  onSignal: (signal, handler) => {
    process.on(signal, handler);
    return () => process.off(signal, handler);
  },
});
// Exit explicitly once output is flushed: a stray handle must never keep a stopped gateway alive.
process.stdout.write("", () => process.exit(code));

function stdoutIsFile(): boolean {
  try {
    return fstatSync(1).isFile();
  } catch {
    return false;
  }
}
