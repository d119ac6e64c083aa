/**
 * The root logger: JSON lines (pino) to a file and/or stderr, with secrets redacted. On a
 * terminal, stderr gets a short human-readable form instead (`pretty`); the file stays JSON.
 * The JSON destinations coalesce the lines of one event-loop turn into one write (log-destination.ts).
 */
import { mkdirSync } from "node:fs";
import { dirname } from "node:path";
import pino, { type Logger } from "pino";
import { coalescingDestination } from "./log-destination.js";
import { formatLogLine } from "./log-format.js";
import { maskUrlCredentials } from "./url-credentials.js";

export interface LoggerOptions {
  level: string;
  /** JSON lines go here (e.g. $KEEL_HOME/logs/gateway.log); also to stderr when `stderr` is set. */
  file?: string;
  stderr?: boolean;
  /** Write stderr lines human-readable (a terminal is watching) instead of JSON. */
  pretty?: boolean;
  /** Where pretty lines go (default process.stderr); tests pass their own sink. */
  prettyOut?: { write(text: string): unknown };
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
    // Logs hold chat text and tool output: private to the gateway's user.
    mkdirSync(dirname(options.file), { recursive: true, mode: 0o700 });
    streams.push({
      stream: coalescingDestination(
        pino.destination({ dest: options.file, sync: true, mkdir: true, mode: 0o600 }),
      ),
    });
  }
  if (options.stderr && options.pretty) {
    const out = options.prettyOut ?? process.stderr;
    const colour = out === process.stderr;
    streams.push({ stream: { write: (line: string) => out.write(formatLogLine(line, colour)) } });
  } else if (options.stderr) {
    streams.push({ stream: coalescingDestination(pino.destination(2)) });
  }
  if (streams.length === 0) return pino({ level: "silent" });
  return pino(
    {
      level: options.level,
      redact: REDACT,
      base: { pid: process.pid },
      // Paths name keys; a password inside a URL can sit in any string (an error's message).
      hooks: { streamWrite: maskUrlCredentials },
    },
    pino.multistream(streams),
  );
}
