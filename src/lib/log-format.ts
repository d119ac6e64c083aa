/**
 * A small human-readable form of pino's JSON lines for a terminal (no pino-pretty dependency):
 * `12:04:05 WARN  outbox: delivery failed  outboxId=3 err="socket hang up"`. The log file keeps
 * the JSON; this is only for a person watching the foreground gateway.
 */
const LEVELS: Record<number, string> = {
  10: "TRACE",
  20: "DEBUG",
  30: "INFO",
  40: "WARN",
  50: "ERROR",
  60: "FATAL",
};
const COLOURS: Record<number, string> = { 40: "\x1b[33m", 50: "\x1b[31m", 60: "\x1b[31m" };
const OMIT = new Set(["level", "time", "msg", "pid", "hostname", "component"]);

export function formatLogLine(line: string, colour = false): string {
  let entry: Record<string, unknown>;
  try {
    entry = JSON.parse(line) as Record<string, unknown>;
  } catch {
    return line.endsWith("\n") ? line : `${line}\n`;
  }
  const level = typeof entry.level === "number" ? entry.level : 30;
  const time = typeof entry.time === "number" ? new Date(entry.time) : new Date();
  const clock = time.toTimeString().slice(0, 8);
  const name = (LEVELS[level] ?? String(level)).padEnd(5);
  const label = colour && COLOURS[level] ? `${COLOURS[level]}${name}\x1b[0m` : name;
  const component = typeof entry.component === "string" ? `${entry.component}: ` : "";
  const fields = Object.entries(entry)
    .filter(([k]) => !OMIT.has(k))
    .map(([k, v]) => `${k}=${describe(v)}`);
  const msg = typeof entry.msg === "string" ? entry.msg : "";
  return `${clock} ${label} ${component}${msg}${fields.length ? `  ${fields.join(" ")}` : ""}\n`;
}

function describe(value: unknown): string {
  if (typeof value === "string") return /^[\w.:/@-]+$/.test(value) ? value : JSON.stringify(value);
  if (value && typeof value === "object" && "message" in value) {
    // A serialized error: its message (the stack stays in the JSON log file).
    return JSON.stringify((value as { message: unknown }).message);
  }
  return JSON.stringify(value);
}
