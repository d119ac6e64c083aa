/**
 * Splits a shell command into the simple commands it runs, with shell-quote doing the quoting
 * rules: quoted text stays one word, so `echo "rm -rf /"` is `echo` with one argument, never an
 * `rm`. Command and process substitutions (`$(…)`, backticks, `<(…)`) run code too: their text
 * is handed back separately so the caller can look at it as a command of its own.
 */
import { parse } from "shell-quote";

/** One command of a pipeline or list: its words, where it writes, and how it connects. */
export interface SimpleCommand {
  argv: string[];
  /** Targets of `>`, `>>`, `>|`, `&>` redirections. */
  writesTo: string[];
  /** It reads the previous command's output (`a | b`). */
  pipedFrom: SimpleCommand | null;
  /** Its standard input is a here-document or here-string. */
  hereDocument: boolean;
  /** A process substitution (`<(…)`) is among its arguments. */
  processSubstitution: boolean;
}

export interface ParsedShell {
  commands: SimpleCommand[];
  /** The text of every `$(…)`, backtick and `<(…)`/`>(…)` substitution, outermost first. */
  substitutions: string[];
}

type Token = ReturnType<typeof parse>[number];

const SEPARATORS = new Set([";", "&&", "||", "&", "|", "|&", ";;", "(", ")"]);
const WRITE_REDIRECTS = new Set([">", ">>", ">|", "&>", "&>>"]);

/** Parses `command`; `$NAME` stays as written (nothing is expanded). Never throws. */
export function parseShell(command: string): ParsedShell {
  const substitutions = findSubstitutions(command);
  let tokens: Token[];
  try {
    tokens = parse(command, (name) => `$${name}`);
  } catch {
    // shell-quote rejects a few malformed inputs; whitespace words are the best remaining view.
    tokens = command.split(/\s+/).filter(Boolean);
  }
  const commands: SimpleCommand[] = [];
  let current = emptyCommand(null);
  const close = (pipe: boolean) => {
    if (current.argv.length > 0 || current.writesTo.length > 0) commands.push(current);
    current = emptyCommand(pipe && current.argv.length > 0 ? current : null);
  };
  for (let i = 0; i < tokens.length; i++) {
    const token = tokens[i]!;
    if (typeof token === "string") {
      current.argv.push(token);
      continue;
    }
    if ("comment" in token) break;
    if (!("op" in token)) continue;
    if (token.op === "glob") {
      current.argv.push((token as { pattern: string }).pattern);
    } else if (token.op === "<(" || token.op === ">(") {
      current.processSubstitution = true;
      i = skipGroup(tokens, i);
    } else if (WRITE_REDIRECTS.has(token.op)) {
      const target = tokens[i + 1];
      if (typeof target === "string") {
        current.writesTo.push(target);
        i++;
      }
    } else if (token.op === "<<" || token.op === "<<<") {
      current.hereDocument = true;
      i++;
    } else if (token.op === "<" || token.op === ">&" || token.op === "<&") {
      i++;
    } else if (token.op === "(" && tokens[i - 1] === "$") {
      // `$(…)`: already collected as a substitution; its words are not this command's.
      current.argv.pop();
      i = skipGroup(tokens, i);
    } else if (SEPARATORS.has(token.op)) {
      close(token.op === "|" || token.op === "|&");
    }
  }
  close(false);
  return { commands, substitutions };
}

function emptyCommand(pipedFrom: SimpleCommand | null): SimpleCommand {
  return { argv: [], writesTo: [], pipedFrom, hereDocument: false, processSubstitution: false };
}

/** Index of the `)` closing the group that opens at `start`. */
function skipGroup(tokens: Token[], start: number): number {
  let depth = 0;
  for (let i = start; i < tokens.length; i++) {
    const token = tokens[i]!;
    if (typeof token !== "object" || !("op" in token)) continue;
    if (token.op === "(" || token.op === "<(" || token.op === ">(") depth++;
    if (token.op === ")" && --depth === 0) return i;
  }
  return tokens.length;
}

/**
 * The inner text of `$(…)`, `<(…)`, `>(…)` and backtick substitutions, read from the raw text
 * outside single quotes (inside double quotes they still run).
 */
function findSubstitutions(command: string): string[] {
  const found: string[] = [];
  let single = false;
  for (let i = 0; i < command.length; i++) {
    const c = command[i]!;
    if (c === "\\" && !single) {
      i++;
      continue;
    }
    if (c === "'") single = !single;
    if (single) continue;
    const opensGroup = (c === "$" || c === "<" || c === ">") && command[i + 1] === "(";
    if (opensGroup) {
      const end = closingParen(command, i + 1);
      found.push(command.slice(i + 2, end));
      i = end;
    } else if (c === "`") {
      const end = command.indexOf("`", i + 1);
      const stop = end === -1 ? command.length : end;
      found.push(command.slice(i + 1, stop));
      i = stop;
    }
  }
  return found;
}

function closingParen(text: string, open: number): number {
  let depth = 0;
  for (let i = open; i < text.length; i++) {
    if (text[i] === "(") depth++;
    if (text[i] === ")" && --depth === 0) return i;
  }
  return text.length;
}
