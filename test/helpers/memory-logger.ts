import pino, { type Logger } from "pino";

/** A pino logger that keeps every line as a parsed object, for tests where a log line is the behaviour. */
export function createMemoryLogger(): { logger: Logger; lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  const logger = pino(
    { level: "trace" },
    {
      write(line: string) {
        lines.push(JSON.parse(line) as Record<string, unknown>);
      },
    },
  );
  return { logger, lines };
}
