/** How `keel chat` shows a tool call as it starts: `⚙ terminal: ls -la`. */

const MAX_SUMMARY = 100;

/** The argument a person recognises a call by: the command, the path, else the arguments. */
const SUMMARY_KEYS = ["command", "path", "action", "name", "url", "query"];

/** One line for a tool call; `args` is the call's JSON arguments as the model sent them. Pure. */
export function toolLine(name: string, args: string): string {
  const summary = summarise(args);
  return summary ? `⚙ ${name}: ${summary}` : `⚙ ${name}`;
}

function summarise(args: string): string {
  let text = args;
  try {
    const parsed: unknown = JSON.parse(args);
    if (parsed !== null && typeof parsed === "object" && !Array.isArray(parsed)) {
      const record = parsed as Record<string, unknown>;
      const key = SUMMARY_KEYS.find((k) => typeof record[k] === "string");
      text = key === undefined ? JSON.stringify(parsed) : (record[key] as string);
      if (text === "{}") text = "";
    }
  } catch {
    // Not JSON (a model's malformed call): show what it sent.
  }
  const line = text.replace(/\s+/g, " ").trim();
  return line.length > MAX_SUMMARY ? `${line.slice(0, MAX_SUMMARY - 1)}…` : line;
}
