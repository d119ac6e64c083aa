/** The root logger: JSON lines (pino) to a file and/or stderr, with secrets redacted. */
import { mkdirSync } from "node:fs";
import { dirname } from "node:path";
import pino, { type Logger } from "pino";

export interface LoggerOptions {
  level: string;
  /** JSON lines go here (e.g. $KEEL_HOME/logs/gateway.log); also to stderr when `stderr` is set. */
  file?: string;
  stderr?: boolean;
}

const REDACT = [
  "*.token",
  "*.api_key",
  "*.apiKey",
  "*.key",
  "*.authorization",
  "req.headers.authorization",
  "config.control.token",
];

export function createLogger(options: LoggerOptions): Logger {
  const streams: pino.StreamEntry[] = [];
  if (options.file) {
    mkdirSync(dirname(options.file), { recursive: true });
    streams.push({ stream: pino.destination({ dest: options.file, sync: true, mkdir: true }) });
  }
  if (options.stderr) streams.push({ stream: pino.destination(2) });
  if (streams.length === 0) return pino({ level: "silent" });
  return pino(
    { level: options.level, redact: REDACT, base: { pid: process.pid } },
    pino.multistream(streams),
  );
}
