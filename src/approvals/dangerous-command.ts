/**
 * Which shell commands wait for a human (`tools.approval: dangerous`). The built-in rules look at
 * the parsed command (shell-words.ts), so quoting is respected: `echo "rm -rf /"` only prints,
 * while `bash -c 'rm -rf ~'`, `sudo rm -r x` or `echo $(rm -rf ~)` delete. Wrappers that run
 * their arguments as a command (`sudo`, `env`, `nohup`, `xargs`, `timeout`, …) are looked
 * through, and `sh -c`/`eval` payloads are parsed as commands of their own. The list is in
 * docs/security.md ("Approvals").
 */
import { parseShell, type SimpleCommand } from "./shell-words.js";

/** Why a command needs approval: a rule id (the unit `approve_session` allows) and a phrase. */
export interface DangerMatch {
  rule: string;
  reason: string;
}

export interface CommandPolicy {
  /** Extra patterns (regular expressions, `tools.dangerous_patterns`). */
  dangerous: readonly RegExp[];
  /** Patterns that are never asked about (`tools.allow_patterns`); they win over every rule. */
  allow: readonly RegExp[];
}

const SHELLS = new Set(["sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "fish", "busybox"]);
const INTERPRETERS = new Set([...SHELLS, "python", "python3", "perl", "ruby", "node", "php"]);
const DOWNLOADERS = new Set(["curl", "wget", "fetch", "aria2c"]);
const DECODERS = new Set(["base64", "xxd", "openssl", "gunzip", "zcat"]);
const DB_CLIENTS = new Set([
  "psql",
  "mysql",
  "mariadb",
  "sqlite3",
  "mongo",
  "mongosh",
  "cockroach",
]);
const POWER = new Set(["shutdown", "reboot", "halt", "poweroff"]);
const DISK_TOOLS = new Set(["mkfs", "mke2fs", "mkswap", "wipefs", "sgdisk", "blkdiscard", "shred"]);
const DISK_TOOLS_INTERACTIVE = new Set(["fdisk", "sfdisk", "parted", "cfdisk", "gdisk"]);
const PRIVILEGE = new Set(["sudo", "doas", "su", "pkexec", "run0"]);
const SYSTEMCTL_READ = new Set(["status", "show", "cat", "help", "--version", "list-units"]);
/** Raw block devices (not /dev/null, /dev/stdout, /dev/tty…). */
const RAW_DEVICE = /^\/dev\/(sd|hd|vd|xvd|nvme|mmcblk|disk|loop|md|dm-|mapper\/|nbd|rdisk)/;
/** Places whose files configure the system or the user's shell and keys. */
const SENSITIVE_PATH =
  /^(\/etc\/|\/boot\/|\/usr\/|\/bin\/|\/sbin\/|\/lib|~\/\.ssh\/|\$HOME\/\.ssh\/|~\/\.(bashrc|zshrc|profile|bash_profile)$|\$HOME\/\.(bashrc|zshrc|profile|bash_profile)$)/;
const DESTRUCTIVE_SQL =
  /\b(drop\s+(database|schema|table)|truncate\s+(table\s+)?\w|flushall|flushdb|dropDatabase\s*\()/i;
const DELETE_WITHOUT_WHERE = /\bdelete\s+from\s+[\w."]+\s*(;|$)/i;

/** How deep `sh -c 'sh -c …'` nesting is followed; deeper is dangerous by itself. */
const MAX_DEPTH = 4;

/**
 * The first reason `command` needs approval, or null. `policy.allow` wins over everything for a
 * simple command it matches; `policy.dangerous` patterns are tested against each simple command
 * (its words joined by single spaces) and against the whole text.
 */
export function classifyCommand(
  command: string,
  policy: CommandPolicy = { dangerous: [], allow: [] },
): DangerMatch | null {
  return classifyText(command, policy, 0);
}

function classifyText(command: string, policy: CommandPolicy, depth: number): DangerMatch | null {
  if (depth > MAX_DEPTH) return { rule: "deep_nesting", reason: "deeply nested shell commands" };
  if (/:\s*\(\s*\)\s*\{[^}]*:\s*\|\s*:/.test(command)) {
    return { rule: "fork_bomb", reason: "a fork bomb" };
  }
  const parsed = parseShell(command);
  for (const inner of parsed.substitutions) {
    const match = classifyText(inner, policy, depth + 1);
    if (match) return match;
  }
  for (const simple of parsed.commands) {
    const line = simple.argv.join(" ");
    if (policy.allow.some((pattern) => pattern.test(line))) continue;
    const user = policy.dangerous.find((pattern) => pattern.test(line));
    if (user) return userMatch(user);
    const match = classifySimple(simple, policy, depth);
    if (match) return match;
  }
  if (parsed.commands.length > 1 && !policy.allow.some((p) => p.test(command.trim()))) {
    const user = policy.dangerous.find((pattern) => pattern.test(command));
    if (user) return userMatch(user);
  }
  return null;
}

function userMatch(pattern: RegExp): DangerMatch {
  return {
    rule: `pattern:${pattern.source}`,
    reason: `matches tools.dangerous_patterns ${pattern}`,
  };
}

function classifySimple(
  simple: SimpleCommand,
  policy: CommandPolicy,
  depth: number,
): DangerMatch | null {
  for (const target of simple.writesTo) {
    const match = writeTarget(target);
    if (match) return match;
  }
  const argv = unwrap(simple.argv);
  if (argv === "privilege") return { rule: "privilege", reason: "runs as another user (sudo)" };
  if (argv.length === 0) return null;
  const program = basename(argv[0]!);
  const args = argv.slice(1);
  if (SHELLS.has(program) || program === "eval") {
    const script = program === "eval" ? args.join(" ") : inlineScript(args);
    if (script !== null) return classifyText(script, policy, depth + 1);
  }
  if (INTERPRETERS.has(program) && isFedCode(simple, args)) {
    return { rule: "pipe_to_shell", reason: "feeds downloaded or piped text to an interpreter" };
  }
  return programRule(program, args);
}

/**
 * Peels wrappers that run the rest of their arguments as a command. Returns "privilege" for a
 * privilege change (dangerous by itself, whatever it runs).
 */
function unwrap(argv: readonly string[]): string[] | "privilege" {
  let words = [...argv];
  for (let guard = 0; guard < 10 && words.length > 0; guard++) {
    while (words.length > 0 && /^[A-Za-z_][A-Za-z0-9_]*=/.test(words[0]!)) words.shift();
    const program = basename(words[0] ?? "");
    if (PRIVILEGE.has(program)) return "privilege";
    const rest = words.slice(1);
    if (program === "env") words = dropLeading(rest, (w) => w.startsWith("-") || w.includes("="));
    else if (["nohup", "exec", "command", "builtin", "time", "stdbuf", "setsid"].includes(program))
      words = dropLeading(rest, (w) => w.startsWith("-"));
    else if (program === "nice" || program === "ionice" || program === "chrt")
      words = dropOptionsWithValues(rest);
    else if (program === "timeout") words = dropOptionsWithValues(rest).slice(1);
    else if (program === "xargs") words = dropOptionsWithValues(rest);
    else if (program === "busybox" && rest.length > 0 && !rest[0]!.startsWith("-")) words = rest;
    else return words;
  }
  return words;
}

function dropLeading(words: string[], skip: (word: string) => boolean): string[] {
  let i = 0;
  while (i < words.length && skip(words[i]!)) i++;
  return words.slice(i);
}

/** Drops `-x`, `-x VALUE` (when VALUE is a number) and `--x=…` options before the command. */
function dropOptionsWithValues(words: string[]): string[] {
  let i = 0;
  while (i < words.length && words[i]!.startsWith("-")) {
    i++;
    if (i < words.length && /^-?\d+[smhd]?$/.test(words[i]!)) i++;
  }
  return words.slice(i);
}

/** The script of `sh -c SCRIPT` (also `-lc`, `-ec`…), or null when the shell reads a file/stdin. */
function inlineScript(args: string[]): string | null {
  const index = args.findIndex((a) => /^-[a-z]*c[a-z]*$/.test(a));
  if (index === -1) return null;
  return args[index + 1] ?? "";
}

/** An interpreter reading its program from a pipe, a here-document or a process substitution. */
function isFedCode(simple: SimpleCommand, args: string[]): boolean {
  if (simple.processSubstitution) return true;
  const readsStdin = args.every((a) => a.startsWith("-")) || args.includes("-");
  if (!readsStdin) return false;
  if (simple.hereDocument) return SHELLS.has(basename(simple.argv[0] ?? ""));
  const source = simple.pipedFrom ? basename(unwrapped(simple.pipedFrom.argv)[0] ?? "") : null;
  if (source === null) return false;
  // Any text piped into a shell runs unseen; for other interpreters only downloads and decodes.
  return (
    SHELLS.has(basename(simple.argv[0] ?? "")) || DOWNLOADERS.has(source) || DECODERS.has(source)
  );
}

function unwrapped(argv: string[]): string[] {
  const words = unwrap(argv);
  return words === "privilege" ? [] : words;
}

function writeTarget(target: string): DangerMatch | null {
  if (RAW_DEVICE.test(target)) return { rule: "raw_device", reason: `writes to ${target}` };
  if (SENSITIVE_PATH.test(target)) {
    return { rule: "system_file", reason: `writes to ${target}` };
  }
  return null;
}

function programRule(program: string, args: string[]): DangerMatch | null {
  const flags = shortFlags(args);
  const has = (...names: string[]) => args.some((a) => names.includes(a));
  if (program === "rm" && (flags.has("r") || flags.has("R") || has("--recursive"))) {
    return { rule: "recursive_delete", reason: "deletes recursively" };
  }
  if (program === "find" && (has("-delete") || execsDelete(args))) {
    return { rule: "recursive_delete", reason: "deletes the files find lists" };
  }
  if (POWER.has(program) || (program === "init" && has("0", "6")) || program === "telinit") {
    return { rule: "power", reason: "shuts down or reboots the machine" };
  }
  if (
    DISK_TOOLS.has(program) ||
    program.startsWith("mkfs.") ||
    DISK_TOOLS_INTERACTIVE.has(program)
  ) {
    return { rule: "disk_format", reason: `${program} formats or wipes disks` };
  }
  if (program === "dd" && args.some((a) => a.startsWith("of="))) {
    return { rule: "dd_write", reason: "dd writes over a file or device" };
  }
  if (["chmod", "chown", "chgrp"].includes(program)) {
    if (flags.has("R") || has("--recursive")) {
      return { rule: "recursive_permissions", reason: `${program} -R changes a whole tree` };
    }
    if (program === "chmod" && args.some((a) => /^0?[0-7]?77[67]$|^a\+w$|^o\+w$/.test(a))) {
      return { rule: "world_writable", reason: "makes files writable by everyone" };
    }
  }
  if (program === "git") return gitRule(args);
  if (program === "kill" || program === "pkill" || program === "killall") {
    return killRule(program, args);
  }
  if (program === "systemctl" || program === "service") {
    const verb = args.find((a) => !a.startsWith("-"));
    const read = verb === undefined || SYSTEMCTL_READ.has(verb) || /^(is-|list-)/.test(verb);
    const serviceRead = program === "service" && /^(status|--status-all)$/.test(args.at(-1) ?? "");
    if (!read && !serviceRead)
      return { rule: "systemctl", reason: `${program} ${verb} changes services` };
  }
  if (program === "dropdb" || (program === "mysqladmin" && has("drop"))) {
    return { rule: "drop_database", reason: "drops a database" };
  }
  if (DB_CLIENTS.has(program) || program === "redis-cli") {
    const sql = args.join(" ");
    if (DESTRUCTIVE_SQL.test(sql) || DELETE_WITHOUT_WHERE.test(sql)) {
      return { rule: "drop_database", reason: "destroys database contents" };
    }
  }
  if (
    (program === "cp" || program === "mv" || program === "tee" || program === "ln") &&
    args.length
  ) {
    const target = args.filter((a) => !a.startsWith("-")).at(-1) ?? "";
    const match = writeTarget(target);
    if (match) return match;
  }
  if (program === "crontab" && flags.has("r")) {
    return { rule: "crontab_remove", reason: "removes every cron job" };
  }
  if (program === "iptables" && (flags.has("F") || has("--flush"))) {
    return { rule: "firewall_flush", reason: "flushes the firewall rules" };
  }
  return null;
}

function gitRule(args: string[]): DangerMatch | null {
  const sub = args.find((a) => !a.startsWith("-"));
  const rest = args.slice(args.indexOf(sub ?? "") + 1);
  const flags = shortFlags(rest);
  if (sub === "push") {
    const forced =
      flags.has("f") ||
      rest.some((a) => a === "--force" || a.startsWith("--force-with-lease") || a === "--mirror") ||
      rest.some((a) => /^\+[^+]/.test(a)) ||
      rest.includes("--delete");
    if (forced) return { rule: "git_force_push", reason: "rewrites or deletes remote history" };
  }
  if (sub === "reset" && rest.includes("--hard")) {
    return { rule: "git_discard", reason: "git reset --hard discards uncommitted work" };
  }
  if (sub === "clean" && (flags.has("f") || rest.includes("--force"))) {
    return { rule: "git_discard", reason: "git clean -f deletes untracked files" };
  }
  if (
    sub === "branch" &&
    (flags.has("D") || (rest.includes("--delete") && rest.includes("--force")))
  ) {
    return { rule: "git_discard", reason: "git branch -D deletes an unmerged branch" };
  }
  return null;
}

function killRule(program: string, args: string[]): DangerMatch | null {
  const targets = args.filter((a) => !a.startsWith("-") || /^-\d+$/.test(a));
  if (program === "kill") {
    // `kill -9 -1` (every process), `kill 1` (init).
    if (args.includes("-1") || targets.includes("1") || targets.includes("-1")) {
      return { rule: "kill_init", reason: "kills init or every process" };
    }
    return null;
  }
  if (targets.some((t) => ["init", "systemd", "launchd"].includes(t))) {
    return { rule: "kill_init", reason: "kills the init system" };
  }
  if (
    args.some((a) => ["-9", "-KILL", "-SIGKILL", "--signal=KILL"].includes(a)) &&
    program === "killall"
  ) {
    return { rule: "kill_all", reason: "force-kills every process of a name" };
  }
  return null;
}

/** `find … -exec rm …` / `-execdir rm`. */
function execsDelete(args: string[]): boolean {
  return args.some(
    (a, i) =>
      (a === "-exec" || a === "-execdir" || a === "-ok") && basename(args[i + 1] ?? "") === "rm",
  );
}

/** The letters of short options (`-rf` → r, f); long options and operands are skipped. */
function shortFlags(args: string[]): Set<string> {
  const letters = new Set<string>();
  for (const a of args) {
    if (/^-[A-Za-z]+$/.test(a)) for (const letter of a.slice(1)) letters.add(letter);
  }
  return letters;
}

function basename(word: string): string {
  return word.slice(word.lastIndexOf("/") + 1);
}
