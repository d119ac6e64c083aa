/**
 * Which shell commands wait for a human (`tools.approval: dangerous`), judged on the parsed
 * command (shell-syntax.ts) and failing closed: every simple command anywhere in it is judged —
 * behind wrappers (command-wrappers.ts), inside `sh -c`/`eval`/here-documents fed to a shell,
 * substitutions, function bodies — and what the parser cannot see through is dangerous by
 * itself: a program named by a variable or substitution, text decoded or computed and then run
 * as code, inline interpreter code (`python -c`), an alias, a syntax error. The list is in
 * docs/security.md ("Approvals").
 */
import { type DangerMatch, programRule, writeTarget } from "./command-rules.js";
import { innerCommands, isWrapper, PRIVILEGE } from "./command-wrappers.js";
import type { ShellParser, ShellWord, SimpleCommand, StdinFeed } from "./shell-syntax.js";

export type { DangerMatch };

export interface CommandPolicy {
  /** Extra patterns (regular expressions, `tools.dangerous_patterns`), per simple command. */
  dangerous: readonly RegExp[];
  /** Simple commands never asked about (`tools.allow_patterns`); they win over every rule. */
  allow: readonly RegExp[];
}

/** One danger found, and the unit an "approve for session" grants for it. */
export interface Danger extends DangerMatch {
  /** `cmd:<normalized simple command>`, or `text:<whole command>` for what was not parsed. */
  grant: string;
}

/** Everything the classifier found in a command. */
export interface CommandJudgement {
  dangers: Danger[];
  /**
   * The grant unit of each simple command the command line runs (for `always` mode):
   * `cmd:<program> <subcommand>` for read-only programs, else `cmd:<its normalized words>`.
   */
  commands: string[];
}

const SHELLS = new Set([
  "sh",
  "bash",
  "zsh",
  "dash",
  "ksh",
  "mksh",
  "ash",
  "yash",
  "posh",
  "fish",
  "csh",
  "tcsh",
]);
/** Interpreters and the options that hand them their program inline. */
const INLINE_CODE: Record<string, RegExp> = {
  python: /^-[A-Za-z]*c/,
  perl: /^-[A-Za-z]*[eE]/,
  ruby: /^-[A-Za-z]*e/,
  node: /^(-[A-Za-z]*[ep]|--eval|--print)/,
  nodejs: /^(-[A-Za-z]*[ep]|--eval|--print)/,
  bun: /^(-e|--eval|-p|--print)/,
  deno: /^(eval)$/,
  php: /^-[A-Za-z]*[rR]/,
  lua: /^-[A-Za-z]*e/,
  luajit: /^-[A-Za-z]*e/,
  Rscript: /^-e/,
  tclsh: /^$/,
  pwsh: /^-(c|command)/i,
  osascript: /^-e/,
  jshell: /^$/,
};
/** Programs whose grant covers every use of the same subcommand (they only read). */
const READ_ONLY = new Set([
  "ls",
  "cat",
  "head",
  "tail",
  "wc",
  "grep",
  "rg",
  "pwd",
  "echo",
  "printf",
  "date",
  "whoami",
  "id",
  "uname",
  "which",
  "file",
  "stat",
  "du",
  "df",
  "tree",
  "diff",
  "true",
  "false",
]);
const GIT_READ_ONLY = new Set(["status", "log", "diff", "show", "rev-parse", "ls-files", "blame"]);

/** Longer commands are not read: they ask (the rule `unparsed`). */
const MAX_COMMAND_CHARS = 100_000;

/** How deep `sh -c 'sh -c …'` nesting is followed; deeper is dangerous by itself. */
const MAX_DEPTH = 6;

/**
 * The first reason `command` needs approval, or null. Patterns apply to each simple command:
 * an allow pattern exempts the simple command it matches (with what it runs), never a list.
 */
export function classifyCommand(
  parser: ShellParser,
  command: string,
  policy: CommandPolicy = { dangerous: [], allow: [] },
): DangerMatch | null {
  const found = judgeCommand(parser, command, policy).dangers[0];
  return found ? { rule: found.rule, reason: found.reason } : null;
}

/** Every danger in `command` and the grant unit of each simple command. Never throws. */
export function judgeCommand(
  parser: ShellParser,
  command: string,
  policy: CommandPolicy = { dangerous: [], allow: [] },
): CommandJudgement {
  const whole = `text:${command}`;
  const unchecked = (reason: string): CommandJudgement => ({
    dangers: [{ rule: "unparsed", reason, grant: whole }],
    commands: [whole],
  });
  // Reading costs some 15 µs per word (measured): a longer command would hold up the gateway.
  if (command.length > MAX_COMMAND_CHARS) return unchecked("it is too long to check");
  const judge = new Judge(parser, policy);
  try {
    judge.script(command, 0, true);
  } catch {
    // Whatever the reader could not take (nesting beyond the stack): asked, never run unchecked.
    return unchecked("the shell grammar cannot read all of it, so it cannot be checked");
  }
  return { dangers: judge.dangers, commands: [...new Set(judge.commands)] };
}

class Judge {
  readonly dangers: Danger[] = [];
  readonly commands: string[] = [];

  constructor(
    private readonly parser: ShellParser,
    private readonly policy: CommandPolicy,
  ) {}

  /** A command line: parsed, each of its simple commands and writes judged. */
  script(text: string, depth: number, top: boolean): void {
    const whole = `text:${text}`;
    if (depth > MAX_DEPTH) {
      this.add({ rule: "deep_nesting", reason: "deeply nested shell commands" }, whole);
      return;
    }
    if (/:\s*\(\s*\)\s*\{[^}]*:\s*\|\s*:/.test(text)) {
      this.add({ rule: "fork_bomb", reason: "a fork bomb" }, whole);
    }
    const parsed = this.parser.parse(text);
    if (parsed.broken) {
      const reason = "the shell grammar cannot read all of it, so it cannot be checked";
      this.add({ rule: "unparsed", reason }, whole);
      if (top) this.commands.push(whole);
    }
    for (const target of parsed.writes) {
      const match = writeTarget(target);
      if (match) this.add(match, `cmd:> ${target.text}`);
      if (top) this.commands.push(`cmd:> ${target.text}`);
    }
    for (const command of parsed.commands) this.simple(command, depth, top);
  }

  /** One simple command, its wrappers' commands and the scripts it hands a shell. */
  private simple(command: SimpleCommand, depth: number, top: boolean): void {
    const { words } = command;
    if (words.length === 0) return;
    const line = words.map((w) => w.text).join(" ");
    const grant = `cmd:${line}`;
    const program = basename(words[0]!.text);
    const args = words.slice(1);
    if (top) this.commands.push(grantUnit(program, args, grant));
    const base = [program, ...args.map((a) => a.text)].join(" ");
    if (this.policy.allow.some((p) => p.test(line))) return;
    const user = this.policy.dangerous.find((p) => p.test(line) || p.test(base));
    if (user) {
      this.add(
        { rule: `pattern:${user.source}`, reason: `matches tools.dangerous_patterns ${user}` },
        grant,
      );
    }
    if (words[0]!.dynamic) {
      this.add(
        { rule: "unseen_program", reason: "the program's name is only known when it runs" },
        grant,
      );
      return;
    }
    const match = this.rule(program, args, command.stdin, depth, grant);
    if (match) this.add(match, grant);
    if (isWrapper(program)) {
      for (const inner of innerCommands(program, args)) {
        if (inner.kind === "words") {
          // xargs adds words read from its input (`-rf` as well as file names).
          const words =
            program === "xargs"
              ? [...inner.words, { text: "$(xargs input)", dynamic: true }]
              : inner.words;
          this.simple({ words, stdin: command.stdin, assignments: [] }, depth + 1, false);
        } else this.code(inner.word, depth, grant, "runs");
      }
    }
  }

  /** Rules about how the command runs code, then the program's own rules. */
  private rule(
    program: string,
    args: ShellWord[],
    stdin: StdinFeed | null,
    depth: number,
    grant: string,
  ): DangerMatch | null {
    const texts = args.map((a) => a.text);
    if (PRIVILEGE.has(program))
      return { rule: "privilege", reason: `runs as another user (${program})` };
    if (SHELLS.has(program)) return this.shell(args, stdin, depth, grant);
    if (program === "eval") {
      this.code(joined(args), depth, grant, "evaluates");
      return null;
    }
    if (program === "source" || program === ".") {
      if (args[0] && isStdin(args[0].text)) return this.fed(program, stdin, depth, grant);
      return args[0]?.dynamic ? unseen(`${program} reads code computed when it runs`) : null;
    }
    if (program === "alias" && texts.some((t) => t.includes("="))) {
      return unseen("an alias changes what later words run");
    }
    if (program === "trap" && args[0] && !args[0].text.startsWith("-")) {
      this.code(args[0], depth, grant, "runs on a signal");
      return null;
    }
    if (program === "awk" || program === "gawk" || program === "mawk" || program === "nawk") {
      return awkRule(texts);
    }
    const language = interpreterOf(program);
    if (language) return interpreterRule(program, language, args, stdin);
    return programRule(program, args);
  }

  /** `sh -c SCRIPT`, `sh` reading a here-document, a pipe or a file. */
  private shell(
    args: ShellWord[],
    stdin: StdinFeed | null,
    depth: number,
    grant: string,
  ): DangerMatch | null {
    let command = false;
    let fromStdin = false;
    let i = 0;
    for (; i < args.length; i++) {
      const a = args[i]!.text;
      if (a === "--" || a === "-") {
        i++;
        break;
      }
      if (!/^[-+]/.test(a)) break;
      if (/^[-+]o$|^[-+]O$|^--(rcfile|init-file)$/.test(a)) i++;
      else if (/^-[A-Za-z]*c/.test(a)) command = true;
      else if (/^-[A-Za-z]*s/.test(a)) fromStdin = true;
    }
    const operand = args[i];
    if (command) {
      if (operand) this.code(operand, depth, grant, "runs");
      return null;
    }
    if (operand && !fromStdin && !isStdin(operand.text)) {
      return operand.dynamic ? unseen("a shell runs a script named when it runs") : null;
    }
    return this.fed("a shell", stdin, depth, grant);
  }

  /** A shell reading its script from its input: a here-document is judged, anything else asks. */
  private fed(
    who: string,
    stdin: StdinFeed | null,
    depth: number,
    grant: string,
  ): DangerMatch | null {
    if (stdin?.kind === "text") {
      this.code({ text: stdin.text, dynamic: stdin.dynamic }, depth, grant, "reads");
      return null;
    }
    return stdin ? fedCode(who, stdin) : null;
  }

  /** Text a shell will run: judged as a command line, or dangerous when computed. */
  private code(word: ShellWord, depth: number, grant: string, verb: string): void {
    // Judged as written first (the better reason when it is plainly dangerous), then: what a
    // variable or substitution puts into code is only known when it runs.
    this.script(word.text, depth + 1, false);
    if (word.dynamic && /\$\(|`|\$\{|\$[A-Za-z_0-9@*#?!-]/.test(word.text)) {
      this.add(
        unseen(`${verb} text computed when it runs (a variable or a substitution) as code`),
        grant,
      );
    }
  }

  private add(match: DangerMatch, grant: string): void {
    this.dangers.push({ ...match, grant });
  }
}

/** Paths that name the command's own input. */
function isStdin(path: string): boolean {
  return /^\/(dev\/(stdin|fd\/\d+)|proc\/[^/]+\/fd\/\d+)$/.test(path);
}

function unseen(reason: string): DangerMatch {
  return { rule: "unseen_code", reason };
}

/** A shell or interpreter reading its program from its input: a pipe, or a redirection. */
function fedCode(who: string, stdin: StdinFeed): DangerMatch {
  if (stdin.kind === "pipe") {
    return { rule: "pipe_to_shell", reason: `${who} runs what is piped into it as code` };
  }
  return unseen(`${who} runs the code it reads from its input`);
}

/** `python -c CODE`, `perl -e`, `node -e` …; the program read from input or a computed file. */
function interpreterRule(
  program: string,
  language: string,
  args: ShellWord[],
  stdin: StdinFeed | null,
): DangerMatch | null {
  const inline = INLINE_CODE[language]!;
  const first = args.findIndex((a) => !a.text.startsWith("-") || a.text === "-");
  const options = first === -1 ? args : args.slice(0, first);
  const operand = first === -1 ? undefined : args[first];
  const inlineCode =
    options.some((a) => inline.source !== "^$" && inline.test(a.text)) ||
    (language === "deno" && operand?.text === "eval");
  if (inlineCode) return unseen(`${program} runs code given inline`);
  const readsInput = operand === undefined || operand.text === "-" || isStdin(operand.text);
  if (readsInput && stdin) return fedCode(program, stdin);
  if (operand?.dynamic) return unseen(`${program} runs a file named when it runs`);
  return null;
}

/** `python3.12` → python, `perl5.36` → perl; null for programs that are not interpreters. */
function interpreterOf(program: string): string | null {
  const name = program.replace(/[\d.]+$/, "");
  if (name === "pypy") return "python";
  return name in INLINE_CODE ? name : null;
}

/** awk programs that start commands: `system(…)`, `print | "cmd"`, `"cmd" | getline`. */
function awkRule(args: string[]): DangerMatch | null {
  const program = args.find((a) => !a.startsWith("-"));
  if (program === undefined) return null;
  const code = program.replace(/"(\\.|[^"\\])*"/g, '""');
  if (/\bsystem\s*\(/.test(code) || /(^|[^|])\|(?!\|)/.test(code)) {
    return unseen("awk runs shell commands from its program");
  }
  return null;
}

/** What "approve for session" grants for a command that is not dangerous (`always` mode). */
function grantUnit(program: string, args: ShellWord[], grant: string): string {
  if (READ_ONLY.has(program)) return `cmd:${program}`;
  if (program === "git" && args[0] && !args[0].text.startsWith("-")) {
    // Only a plain `git status`: global options (`-c`, `-C`) change what it does or where.
    if (GIT_READ_ONLY.has(args[0].text)) return `cmd:git ${args[0].text}`;
  }
  return grant;
}

function joined(words: readonly ShellWord[]): ShellWord {
  return { text: words.map((w) => w.text).join(" "), dynamic: words.some((w) => w.dynamic) };
}

function basename(word: string): string {
  return word.slice(word.lastIndexOf("/") + 1);
}
