/**
 * Programs that run another command given in their arguments (`env`, `timeout`, `xargs`,
 * `find -exec`, `watch`, `script -c` …): what they run, as words or as a shell script, so that
 * the classifier judges it as well. Options are read as the real tools read them (GNU getopt,
 * long options by unique prefix), so `timeout -s KILL 9 rm -rf x` runs `rm -rf x`.
 */
import { type OptionSpec, readOptions } from "./command-options.js";
import type { ShellWord } from "./shell-syntax.js";

/** What a wrapper runs: a command (words), or a script a shell reads. */
export type Inner = { kind: "words"; words: ShellWord[] } | { kind: "script"; word: ShellWord };

/** Programs that run their command as someone else (root): asked about whatever they run. */
export const PRIVILEGE = new Set([
  "sudo",
  "doas",
  "su",
  "pkexec",
  "run0",
  "runuser",
  "sg",
  "newgrp",
  "nsenter",
  "systemd-run",
]);

interface WrapperSpec extends OptionSpec {
  /** Operands before the command (`timeout DURATION`, `chroot NEWROOT`, `flock FILE`). */
  operands?: number;
  /** An option whose value is a script (`flock -c`, `script -c`, `env -S` splits it). */
  scriptOption?: readonly string[];
  /** The words after the options are one script joined by spaces (`watch`). */
  joined?: boolean;
  /** These options mean it runs nothing (`command -v`, `taskset -p`). */
  noCommand?: readonly string[];
}

const WRAPPERS: Record<string, WrapperSpec> = {
  env: {
    shortValue: "uCS",
    longValue: ["unset", "chdir", "split-string"],
    longFlag: ["ignore-environment", "null", "debug", "default-signal", "ignore-signal"],
    scriptOption: ["S", "split-string"],
  },
  timeout: {
    shortValue: "sk",
    longValue: ["signal", "kill-after"],
    longFlag: ["preserve-status", "foreground", "verbose"],
    operands: 1,
  },
  nice: { shortValue: "n", longValue: ["adjustment"], numeric: true },
  nohup: {},
  stdbuf: { shortValue: "ioe", longValue: ["input", "output", "error"] },
  setsid: { longFlag: ["ctty", "fork", "wait"] },
  ionice: { shortValue: "cnpPu", longValue: ["class", "classdata", "pid", "pgid", "uid"] },
  chrt: { shortValue: "TPD", operands: 1, noCommand: ["p", "pid"] },
  taskset: { longFlag: ["all-tasks", "cpu-list", "pid"], operands: 1, noCommand: ["p", "pid"] },
  flock: {
    shortValue: "wEc",
    longValue: ["timeout", "wait", "conflict-exit-code", "command"],
    longFlag: ["shared", "exclusive", "unlock", "nonblock", "close", "no-fork", "verbose"],
    operands: 1,
    scriptOption: ["c", "command"],
  },
  script: {
    shortValue: "cIOBTEmo",
    shortOptional: "t",
    longValue: ["command", "log-in", "log-out", "log-io", "log-timing", "echo", "output-limit"],
    longFlag: ["append", "return", "flush", "force", "quiet", "timing"],
    scriptOption: ["c", "command"],
    noCommand: ["*"],
  },
  watch: {
    shortValue: "nq",
    shortOptional: "d",
    longValue: ["interval", "equexit", "shell"],
    longFlag: ["differences", "no-title", "beep", "errexit", "chgexit", "exec", "color", "precise"],
    joined: true,
  },
  unshare: {
    shortValue: "SGRw",
    longValue: ["setuid", "setgid", "root", "wd", "propagation", "setgroups", "map-user"],
    longFlag: ["mount", "uts", "ipc", "net", "pid", "user", "cgroup", "time", "fork"],
  },
  chroot: { longValue: ["userspec", "groups"], longFlag: ["skip-chdir"], operands: 1 },
  xargs: {
    shortValue: "IEdaLnPs",
    shortOptional: "iel",
    longValue: ["arg-file", "delimiter", "max-args", "max-procs", "max-chars"],
    longFlag: ["null", "no-run-if-empty", "verbose", "interactive", "exit", "replace", "eof"],
  },
  command: { noCommand: ["v", "V"] },
  builtin: {},
  exec: { shortValue: "a" },
  time: { shortValue: "fo", longValue: ["format", "output"], longFlag: ["append", "portability"] },
  strace: { shortValue: "abeEIoOpPsSuU", longValue: ["output", "trace", "signal", "user"] },
  ltrace: { shortValue: "aeEnopsuxX", longValue: ["output"] },
  busybox: {},
  coproc: {},
  unbuffer: {},
  eatmydata: {},
  nocache: {},
  torsocks: {},
  proxychains: {},
  proxychains4: {},
  catchsegv: {},
  faketime: { shortValue: "m", operands: 1 },
};

/** True for a program `innerCommands` looks into. */
export function isWrapper(program: string): boolean {
  return program in WRAPPERS || program === "find";
}

/**
 * What `program args…` runs besides itself: nothing for programs that are not wrappers, the
 * command (or script) of a wrapper, every `-exec`/`-execdir`/`-ok`/`-okdir` command of `find`.
 * A wrapper given no command runs none (`nohup` alone), except `xargs`, which runs `echo`.
 */
export function innerCommands(program: string, args: readonly ShellWord[]): Inner[] {
  if (program === "find") return findExecs(args);
  const spec = WRAPPERS[program];
  if (!spec) return [];
  const texts = args.map((a) => a.text);
  const read = readOptions(texts, spec);
  if (spec.noCommand?.some((o) => o === "*" || read.flags.has(o))) {
    return scriptOptions(spec, read.values, args, texts);
  }
  const scripts = scriptOptions(spec, read.values, args, texts);
  let start = read.end;
  if (program === "env") {
    while (start < args.length && /^[A-Za-z_][A-Za-z0-9_]*=/.test(texts[start]!)) start++;
  }
  start += spec.operands ?? 0;
  const rest = args.slice(start);
  const split = scripts[0];
  if (program === "env" && split?.kind === "script") {
    // `env -S 'rm -rf' x`: the split string and the words after it make one command.
    return [{ kind: "script", word: joinWords([split.word, ...rest]) }];
  }
  if (program === "flock" && /^(-c|--command|--comm?a?n?d?)$/.test(rest[0]?.text ?? "")) {
    // `flock FILE -c SCRIPT`: the option may follow the lock file.
    return rest[1] ? [...scripts, { kind: "script", word: rest[1] }] : scripts;
  }
  if (rest.length === 0) return scripts;
  if (spec.joined && !read.flags.has("x") && !read.flags.has("exec")) {
    return [...scripts, { kind: "script", word: joinWords(rest) }];
  }
  return [...scripts, { kind: "words", words: rest }];
}

/** The values of the options that carry a script (`flock -c SCRIPT`). */
function scriptOptions(
  spec: WrapperSpec,
  values: Map<string, string[]>,
  args: readonly ShellWord[],
  texts: string[],
): Inner[] {
  const found: Inner[] = [];
  for (const option of spec.scriptOption ?? []) {
    for (const value of values.get(option) ?? []) {
      // The word it came from tells whether it is known before running.
      const source = args[texts.lastIndexOf(value)];
      found.push({ kind: "script", word: { text: value, dynamic: source?.dynamic ?? false } });
    }
  }
  return found;
}

/** `find … -exec CMD … ;` (or `+`), `-execdir`, `-ok`, `-okdir`: each CMD. */
function findExecs(args: readonly ShellWord[]): Inner[] {
  const found: Inner[] = [];
  for (let i = 0; i < args.length; i++) {
    if (!["-exec", "-execdir", "-ok", "-okdir"].includes(args[i]!.text)) continue;
    let end = i + 1;
    while (end < args.length && args[end]!.text !== ";" && args[end]!.text !== "+") end++;
    found.push({ kind: "words", words: args.slice(i + 1, end) });
    i = end;
  }
  return found;
}

/** Words run as one line by a shell (`watch rm -rf x` runs `sh -c "rm -rf x"`). */
function joinWords(words: readonly ShellWord[]): ShellWord {
  return {
    text: words.map((w) => w.text).join(" "),
    dynamic: words.some((w) => w.dynamic),
  };
}
