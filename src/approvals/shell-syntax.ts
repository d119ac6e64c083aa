/**
 * Reads a shell command with a real grammar (tree-sitter-bash, run as WebAssembly by
 * web-tree-sitter) and hands back every simple command it would run — in lists, pipelines,
 * subshells, groups, `if`/`for`/`while`/`case` bodies, function bodies, command and process
 * substitutions, assignments and here-documents — with each word's value as the shell would see
 * it (quotes removed, escapes decoded) or marked dynamic when only running it would tell (a
 * variable, a substitution, a glob, a brace expansion). The grammar is loaded once, from files
 * inside the installed packages (no network); parsing is synchronous.
 */
import { createRequire } from "node:module";
import { Language, type Node, Parser } from "web-tree-sitter";

/** One word of a command: its value, or what is known of it when it is computed at run time. */
export interface ShellWord {
  /** The value; for a dynamic word, the static parts decoded and the rest as written (`$HOME/.x`). */
  text: string;
  /** Part of it is only known when it runs: an expansion, a substitution, a glob, `{a,b}`. */
  dynamic: boolean;
}

/** Where a command's standard input comes from, when the command line says. */
export type StdinFeed =
  | { kind: "pipe" }
  /** A here-document or here-string attached to the command itself. */
  | { kind: "text"; text: string; dynamic: boolean }
  /** A redirection of a group or loop around it (`{ sh; } <<EOF`), or `< file`. */
  | { kind: "other" };

/** A simple command: its words (assignments left out) and where its input comes from. */
export interface SimpleCommand {
  words: ShellWord[];
  stdin: StdinFeed | null;
  /** Assignments before the program (`A=1 cmd`), as `NAME=value` words. */
  assignments: ShellWord[];
}

export interface ParsedScript {
  commands: SimpleCommand[];
  /** Targets of every writing redirection (`>`, `>>`, `>|`, `&>`, `&>>`), wherever it is. */
  writes: ShellWord[];
  /** The grammar could not read all of it (a syntax error, or something it does not know). */
  broken: boolean;
}

/** A loaded grammar; `parse` is cheap (tens of microseconds for a typical command). */
export interface ShellParser {
  parse(script: string): ParsedScript;
}

/**
 * web-tree-sitter's runtime and the bash grammar from node_modules, loaded once per process:
 * two first loads side by side corrupt each other (on Node 24 the second fails with
 * "Incompatible language version 0"). A load that failed is tried again by the next call.
 */
let grammar: Promise<Language> | undefined;
function bashGrammar(): Promise<Language> {
  grammar ??= (async () => {
    const require = createRequire(import.meta.url);
    await Parser.init();
    return Language.load(require.resolve("tree-sitter-bash/tree-sitter-bash.wasm"));
  })().catch((err: unknown) => {
    grammar = undefined;
    throw err;
  });
  return grammar;
}

/**
 * A parser for the bash grammar (loaded with the first terminal command); rejects when the
 * files are missing.
 */
export async function loadShellParser(): Promise<ShellParser> {
  const bash = await bashGrammar();
  const parser = new Parser();
  parser.setLanguage(bash);
  return {
    parse(script) {
      const tree = parser.parse(script);
      if (!tree) return { commands: [], writes: [], broken: true };
      try {
        return readScript(tree.rootNode);
      } finally {
        // The tree lives in WebAssembly memory: freed by hand, or each call leaks it.
        tree.delete();
      }
    },
  };
}

const WRITE_OPERATORS = new Set([">", ">>", ">|", "&>", "&>>"]);
/** Nodes whose inside is a new command line: input redirections do not reach into them. */
const SCOPES = new Set(["program", "command_substitution", "process_substitution"]);

function readScript(root: Node): ParsedScript {
  const result: ParsedScript = { commands: [], writes: [], broken: root.hasError };
  // Depth first, in source order, with a stack of our own (`((((…))))` nests as deep as it
  // likes), each node with the input its commands would read. Worked out top-down: asking a
  // node for its parent walks down from the root again, quadratic on deep nesting.
  const stack: [Node, StdinFeed | null][] = [[root, null]];
  for (let top = stack.pop(); top; top = stack.pop()) {
    const [node, feed] = top;
    if (node.type === "command") result.commands.push(readCommand(node, feed));
    else if (node.type === "file_redirect") {
      const operator = node.children.find((c) => c && !c.isNamed)?.type ?? "";
      const target = node.childForFieldName("destination");
      if (WRITE_OPERATORS.has(operator) && target) result.writes.push(wordOf(target));
    }
    const children = node.children;
    const first = node.namedChildren[0]?.id;
    for (let i = children.length - 1; i >= 0; i--) {
      const child = children[i];
      if (child) stack.push([child, childFeed(node, child, feed, first)]);
    }
  }
  return result;
}

/** The input a command inside `child` of `parent` reads, when `parent`'s commands read `feed`. */
function childFeed(
  parent: Node,
  child: Node,
  feed: StdinFeed | null,
  firstNamed: number | undefined,
): StdinFeed | null {
  if (SCOPES.has(parent.type)) return null;
  // `cat <<EOF | sh`: the grammar puts the rest of the line inside the here-document's node;
  // what runs there reads the output of the statement it follows (read as a pipe).
  if (parent.type === "heredoc_redirect" && child.isNamed && !child.type.startsWith("heredoc_")) {
    return { kind: "pipe" };
  }
  if (parent.type === "pipeline" && child.isNamed && child.id !== firstNamed) {
    return { kind: "pipe" };
  }
  if (parent.type === "redirected_statement" && child.id === parent.childForFieldName("body")?.id) {
    return redirectedInput(parent, child.type === "command") ?? feed;
  }
  return feed;
}

function readCommand(node: Node, feed: StdinFeed | null): SimpleCommand {
  const words: ShellWord[] = [];
  const assignments: ShellWord[] = [];
  let stdin = feed;
  for (const child of node.namedChildren) {
    if (!child) continue;
    if (child.type === "variable_assignment") assignments.push(wordOf(child));
    else if (child.type === "command_name") words.push(wordOf(child.namedChildren[0] ?? child));
    else if (child.type === "herestring_redirect") stdin = hereString(child);
    else if (!child.type.endsWith("redirect")) words.push(wordOf(child));
  }
  // `$"…"` (a translated string) parses as a lone `$` before the string: the word is unknown.
  if (node.children.some((c) => c && !c.isNamed && c.type === "$")) {
    const at = words.findIndex((w) => !w.dynamic);
    if (at >= 0) words[at] = { text: `$${words[at]!.text}`, dynamic: true };
  }
  return { words, assignments, stdin };
}

/** The input a `… <<EOF`, `… <<< word` or `… < file` statement gives its body. */
function redirectedInput(statement: Node, own: boolean): StdinFeed | null {
  for (const redirect of statement.namedChildren) {
    if (!redirect) continue;
    if (redirect.type === "heredoc_redirect") {
      if (!own) return { kind: "other" };
      const body = redirect.namedChildren.find((c) => c?.type === "heredoc_body");
      const dynamic = body?.namedChildren.some((c) => c && c.type !== "heredoc_content") ?? false;
      return { kind: "text", text: body?.text ?? "", dynamic };
    }
    if (redirect.type === "herestring_redirect") {
      return own ? hereString(redirect) : { kind: "other" };
    }
    if (redirect.type === "file_redirect") {
      const operator = redirect.children.find((c) => c && !c.isNamed)?.type;
      if (operator === "<") return { kind: "other" };
    }
  }
  return null;
}

function hereString(redirect: Node): StdinFeed {
  const value = redirect.namedChildren[0];
  const word = value ? wordOf(value) : { text: "", dynamic: false };
  return { kind: "text", text: word.text, dynamic: word.dynamic };
}

/** The value of a word node, as the shell would pass it (see ShellWord). */
export function wordOf(node: Node): ShellWord {
  switch (node.type) {
    case "word":
      return unquoted(node.text);
    case "number":
      return { text: node.text, dynamic: false };
    case "raw_string":
      return { text: node.text.slice(1, -1), dynamic: false };
    case "ansi_c_string":
      return { text: decodeAnsiC(node.text.slice(2, -1)), dynamic: false };
    case "string":
      return doubleQuoted(node);
    case "concatenation": {
      const parts = node.namedChildren.filter((c): c is Node => c !== null).map(wordOf);
      const text = parts.map((p) => p.text).join("");
      // `{a,b}` comes as pieces of a concatenation: only the whole shows the expansion.
      const braces = BRACE_EXPANSION.test(node.text) && !/["']/.test(node.text);
      return { text, dynamic: braces || parts.some((p) => p.dynamic) };
    }
    case "variable_assignment": {
      const name = node.childForFieldName("name")?.text ?? "";
      const value = node.childForFieldName("value");
      const word = value ? wordOf(value) : { text: "", dynamic: false };
      return { text: `${name}=${word.text}`, dynamic: word.dynamic };
    }
    default:
      // Expansions, substitutions, arithmetic, arrays: known only when it runs. A long one is
      // kept short: copying the text of every level of `$($($(…)))` would take quadratic time.
      return { text: dynamicText(node), dynamic: true };
  }
}

/** The source of a computed word, or its start when it is long (only shown, never judged). */
function dynamicText(node: Node): string {
  if (node.endIndex - node.startIndex <= 200) return node.text;
  const first = node.children[0]?.text ?? "";
  return `${first}…`;
}

const GLOB = /[*?[]/;
const BRACE_EXPANSION = /\{[^{}]*(,|\.\.)[^{}]*\}/;

/** An unquoted word: `\x` is x, a backslash-newline vanishes; unquoted `*?[` or `{a,b}` expand. */
function unquoted(raw: string): ShellWord {
  let text = "";
  let pattern = false;
  for (let i = 0; i < raw.length; i++) {
    const c = raw[i]!;
    if (c === "\\") {
      const next = raw[i + 1];
      if (next !== undefined && next !== "\n") text += next;
      i++;
      continue;
    }
    if (GLOB.test(c)) pattern = true;
    text += c;
  }
  return { text, dynamic: pattern || BRACE_EXPANSION.test(raw) };
}

/** `"…"`: backslash escapes only `$`, `` ` ``, `"`, `\` and newline; expansions stay dynamic. */
function doubleQuoted(node: Node): ShellWord {
  let text = "";
  let dynamic = false;
  for (const child of node.namedChildren) {
    if (!child) continue;
    if (child.type === "string_content") {
      text += child.text.replace(/\\([$`"\\\n])/g, (_, c: string) => (c === "\n" ? "" : c));
    } else {
      text += child.text;
      dynamic = true;
    }
  }
  return { text, dynamic };
}

const C_ESCAPES: Record<string, string> = {
  a: "\x07",
  b: "\b",
  e: "\x1b",
  E: "\x1b",
  f: "\f",
  n: "\n",
  r: "\r",
  t: "\t",
  v: "\v",
  "\\": "\\",
  "'": "'",
  '"': '"',
  "?": "?",
};

/** The body of `$'…'`: `\n`, `\x72`, `\162`, `\u0072`, `\cX` as bash decodes them. */
function decodeAnsiC(body: string): string {
  return body.replace(
    /\\(x[0-9A-Fa-f]{1,2}|u[0-9A-Fa-f]{1,4}|U[0-9A-Fa-f]{1,8}|[0-7]{1,3}|c.|.)/gs,
    (whole, esc: string) => {
      const head = esc[0]!;
      if (head === "x" || head === "u" || head === "U") {
        return String.fromCodePoint(Number.parseInt(esc.slice(1), 16));
      }
      if (/[0-7]/.test(head)) return String.fromCharCode(Number.parseInt(esc, 8) & 0xff);
      if (head === "c") return String.fromCharCode(esc.charCodeAt(1) & 0x1f);
      return C_ESCAPES[head] ?? whole;
    },
  );
}
