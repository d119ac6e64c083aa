/**
 * The built-in rules for one simple command, once wrappers, shells and substitutions are seen
 * through (dangerous-command.ts does that): which programs with which options delete, wipe,
 * rewrite history, change permissions or services, or write where the system or a user's shell
 * and keys are configured. The list is in docs/security.md ("Approvals").
 */
import { scanOptions } from "./command-options.js";
import type { ShellWord } from "./shell-syntax.js";

/** Why a command needs approval: a rule id and a phrase for the card. */
export interface DangerMatch {
  rule: string;
  reason: string;
}

const POWER = new Set(["shutdown", "reboot", "halt", "poweroff"]);
const DISK_TOOLS = new Set([
  "mkfs",
  "mke2fs",
  "mkswap",
  "wipefs",
  "sgdisk",
  "blkdiscard",
  "shred",
  "fdisk",
  "sfdisk",
  "parted",
  "cfdisk",
  "gdisk",
]);
const DB_CLIENTS = new Set([
  "psql",
  "mysql",
  "mariadb",
  "sqlite3",
  "mongo",
  "mongosh",
  "cockroach",
  "redis-cli",
]);
const SYSTEMCTL_READ = new Set(["status", "show", "cat", "help", "--version", "list-units"]);
/** Raw block devices (not /dev/null, /dev/stdout, /dev/tty…). */
const RAW_DEVICE = /^\/dev\/(sd|hd|vd|xvd|nvme|mmcblk|disk|loop|md|dm-|mapper\/|nbd|rdisk)/;
const SYSTEM_DIR = /^\/(etc|boot|usr|bin|sbin|lib[^/]*|var\/spool\/cron)(\/|$)/;
/** A home folder, however it is named: `~`, `~user`, `$HOME`, `${HOME}`, `/home/u`, `/root`. */
const HOME = String.raw`(~[^/]*|\$HOME|\$\{HOME\}|/home/[^/]+|/root|/Users/[^/]+|/var/root)`;
const HOME_DOTFILE = new RegExp(`^${HOME}/+\\.[^/.]`);
const HOME_ROOT = new RegExp(`^${HOME}/*$`);
const DESTRUCTIVE_SQL =
  /\b(drop\s+(database|schema|table)|truncate\s+(table\s+)?\w|flushall|flushdb|dropDatabase\s*\()/i;
const DELETE_WITHOUT_WHERE = /\bdelete\s+from\s+[\w."]+\s*(;|$)/i;

const RM_LONG = [
  "recursive",
  "force",
  "interactive",
  "one-file-system",
  "no-preserve-root",
  "preserve-root",
  "dir",
  "verbose",
];
const CHMOD_LONG = ["recursive", "reference", "changes", "silent", "quiet", "verbose", "from"];

/** Where a write to `target` (a redirection, `tee`, `cp` …) is dangerous; null when it is not. */
export function writeTarget(
  target: ShellWord,
  sources: readonly ShellWord[] = [],
): DangerMatch | null {
  const path = target.text;
  if (RAW_DEVICE.test(path) || (path.startsWith("/dev/") && sources.length > 0)) {
    return { rule: "raw_device", reason: `writes to ${path}` };
  }
  if (SYSTEM_DIR.test(path)) return { rule: "system_file", reason: `writes to ${path}` };
  if (/(^|\/)authorized_keys2?$/.test(path) || /(^|\/)\.ssh(\/|$)/.test(path)) {
    return { rule: "system_file", reason: `writes to ${path} (SSH keys)` };
  }
  if (HOME_DOTFILE.test(path)) {
    return { rule: "system_file", reason: `writes to ${path} (a file that configures a user)` };
  }
  // `cp .bashrc ~`: the file lands as a dotfile of that home.
  if (HOME_ROOT.test(path) && sources.some((s) => /(^|\/)\.[^/.]/.test(s.text))) {
    return { rule: "system_file", reason: `writes a dotfile into ${path}` };
  }
  return null;
}

/**
 * The built-in rule `program args…` falls under, or null. A dynamic argument before `--` may be
 * any option once it runs (`rm $F x` with F=-rf): where options decide, it counts as dangerous.
 */
export function programRule(program: string, words: readonly ShellWord[]): DangerMatch | null {
  const args = words.map((w) => w.text);
  const unknownOption = words.some(
    (w, i) => w.dynamic && /^[-$`*?[{]/.test(w.text) && !args.slice(0, i).includes("--"),
  );
  const computed = (what: string): DangerMatch => ({
    rule: "computed_arguments",
    reason: `${program} gets arguments computed when it runs, which may ${what}`,
  });
  if (program === "rm") {
    const o = scanOptions(args, RM_LONG);
    if (o.has("r") || o.has("R") || o.has("recursive")) {
      return { rule: "recursive_delete", reason: "deletes recursively" };
    }
    if (unknownOption) return computed("include -r");
    return null;
  }
  if (program === "find") {
    const execsRm = args.some(
      (a, i) =>
        /^-(exec|execdir|ok|okdir)$/.test(a) &&
        /(^|\/)(rm|rmdir|shred|unlink)$/.test(args[i + 1] ?? ""),
    );
    if (args.includes("-delete") || execsRm) {
      return { rule: "recursive_delete", reason: "deletes the files find lists" };
    }
    if (unknownOption) return computed("include -delete or -exec");
    return null;
  }
  if (program === "tar" && scanOptions(args, ["remove-files"]).has("remove-files")) {
    return { rule: "recursive_delete", reason: "tar --remove-files deletes what it archives" };
  }
  if (program === "rsync") {
    const deletes = args.some((a) => /^--(del|delete[a-z-]*|remove-source-files)(=|$)/.test(a));
    if (deletes) return { rule: "recursive_delete", reason: "rsync deletes files" };
  }
  if (POWER.has(program) || (program === "init" && args.some((a) => a === "0" || a === "6"))) {
    return { rule: "power", reason: "shuts down or reboots the machine" };
  }
  if (program === "telinit") return { rule: "power", reason: "changes the run level" };
  if (DISK_TOOLS.has(program) || program.startsWith("mkfs.")) {
    return { rule: "disk_format", reason: `${program} formats or wipes disks` };
  }
  if (program === "dd") {
    const target = args.find((a) => a.startsWith("of="));
    if (target !== undefined)
      return { rule: "dd_write", reason: "dd writes over a file or device" };
    if (words.some((w) => w.dynamic)) return computed("include of=");
  }
  if (program === "chmod" || program === "chown" || program === "chgrp") {
    return permissionsRule(program, args, unknownOption);
  }
  if (program === "git") return gitRule(args);
  if (program === "kill" || program === "pkill" || program === "killall") {
    return killRule(program, args);
  }
  if (program === "systemctl" || program === "service") return serviceRule(program, args);
  if (program === "dropdb" || (program === "mysqladmin" && args.includes("drop"))) {
    return { rule: "drop_database", reason: "drops a database" };
  }
  if (DB_CLIENTS.has(program)) {
    const sql = args.join(" ");
    if (DESTRUCTIVE_SQL.test(sql) || DELETE_WITHOUT_WHERE.test(sql)) {
      return { rule: "drop_database", reason: "destroys database contents" };
    }
  }
  if (program === "crontab") return crontabRule(args);
  if (program === "iptables" && scanOptions(args, ["flush"]).has("F")) {
    return { rule: "firewall_flush", reason: "flushes the firewall rules" };
  }
  if (program === "iptables" && scanOptions(args, ["flush"]).has("flush")) {
    return { rule: "firewall_flush", reason: "flushes the firewall rules" };
  }
  return writerRule(program, words);
}

/** `tee`, `cp`, `mv`, `ln`, `install`, `sed -i`, `truncate`: where they write. */
function writerRule(program: string, words: readonly ShellWord[]): DangerMatch | null {
  const operands = words.filter((w) => !w.text.startsWith("-") || w.text === "-");
  const args = words.map((w) => w.text);
  const targets: ShellWord[] = [];
  let sources: ShellWord[] = [];
  if (program === "tee" || program === "truncate") targets.push(...operands);
  else if (["cp", "mv", "ln", "install", "rsync", "scp"].includes(program)) {
    const t = args.findIndex(
      (a) => a === "-t" || a.startsWith("--target-directory") || a.startsWith("--target"),
    );
    if (t !== -1) {
      const value = args[t]!.includes("=") ? args[t]!.split("=")[1]! : args[t + 1];
      if (value !== undefined) targets.push({ text: value, dynamic: false });
      sources = operands;
    } else if (operands.length > 0) {
      targets.push(operands.at(-1)!);
      sources = operands.slice(0, -1);
    }
  } else if (
    program === "sed" &&
    args.some((a) => /^-[a-zA-Z]*i/.test(a) || a.startsWith("--in-place"))
  ) {
    targets.push(...operands.slice(1));
  } else return null;
  for (const target of targets) {
    const match = writeTarget(target, sources);
    if (match) return match;
  }
  return null;
}

function permissionsRule(
  program: string,
  args: string[],
  unknownOption: boolean,
): DangerMatch | null {
  const o = scanOptions(args, CHMOD_LONG);
  if (o.has("R") || o.has("recursive")) {
    return { rule: "recursive_permissions", reason: `${program} -R changes a whole tree` };
  }
  if (program === "chmod") {
    const mode = args.find((a) => !a.startsWith("-") || /^-[rwxXst]+$/.test(a));
    if (mode !== undefined && isWorldWritable(mode)) {
      return { rule: "world_writable", reason: "makes files writable by everyone" };
    }
  }
  if (unknownOption) {
    return {
      rule: "computed_arguments",
      reason: `${program} gets arguments computed when it runs`,
    };
  }
  return null;
}

/** `chmod` modes that let others write: an octal mode whose last digit has 2, `o+w`, `a=rw` … */
export function isWorldWritable(mode: string): boolean {
  if (/^[0-7]{1,4}$/.test(mode)) return (Number.parseInt(mode.at(-1)!, 8) & 2) !== 0;
  return mode.split(",").some((clause) => {
    const m = /^([ugoa]*)([-+=].*)$/.exec(clause);
    if (!m) return false;
    const who = m[1]!;
    // No `who` applies the umask, which keeps others from writing (022 or stricter).
    if (!/[oa]/.test(who)) return false;
    return /[+=][rwxXst]*w/.test(m[2]!);
  });
}

const GIT_GLOBAL_VALUE = ["-C", "-c", "--git-dir", "--work-tree", "--namespace", "--config-env"];
/** `git -c` keys whose value git runs as a command. */
const GIT_COMMAND_KEY =
  /^(alias\.|core\.(pager|editor|sshcommand|fsmonitor|hookspath|askpass)|sequence\.editor|diff\.external|credential\.helper|gpg\.program|.*\.(command|cmd|textconv|driver|helper|program|tool))/i;

function gitRule(args: string[]): DangerMatch | null {
  let i = 0;
  for (; i < args.length; i++) {
    const a = args[i]!;
    if (GIT_GLOBAL_VALUE.includes(a)) {
      const value = args[++i] ?? "";
      if (a === "-c" && GIT_COMMAND_KEY.test(value)) {
        return { rule: "unseen_code", reason: `git -c ${value.split("=")[0]} runs a command` };
      }
    } else if (!a.startsWith("-")) break;
  }
  const sub = args[i];
  const rest = args.slice(i + 1);
  if (sub === "push") {
    const o = scanOptions(rest, [
      "force",
      "force-with-lease",
      "force-if-includes",
      "delete",
      "mirror",
      "prune",
      "porcelain",
      "tags",
      "all",
    ]);
    const forced =
      o.has("f") ||
      o.has("d") ||
      o.has("force") ||
      o.has("force-with-lease") ||
      o.has("delete") ||
      o.has("mirror") ||
      o.has("prune") ||
      // `+main` forces one ref, `:main` deletes it.
      rest.some((a) => /^\+[^+]/.test(a) || /^:[^:]+$/.test(a));
    if (forced) return { rule: "git_force_push", reason: "rewrites or deletes remote history" };
  }
  if (
    sub === "reset" &&
    scanOptions(rest, ["hard", "soft", "mixed", "merge", "keep"]).has("hard")
  ) {
    return { rule: "git_discard", reason: "git reset --hard discards uncommitted work" };
  }
  if (sub === "clean") {
    const o = scanOptions(rest, ["force", "dry-run", "quiet", "exclude", "interactive"]);
    if (o.has("f") || o.has("force")) {
      return { rule: "git_discard", reason: "git clean -f deletes untracked files" };
    }
  }
  if (
    sub === "checkout" &&
    rest.some((a) => a === "." || a === "--") &&
    scanOptions(rest, ["force"]).has("f")
  ) {
    return { rule: "git_discard", reason: "git checkout -f discards changes" };
  }
  if (sub === "branch") {
    const o = scanOptions(rest, ["delete", "force"]);
    if (o.has("D") || (o.has("delete") && o.has("force")) || (o.has("d") && o.has("f"))) {
      return { rule: "git_discard", reason: "git branch -D deletes an unmerged branch" };
    }
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
  const force = args.some((a) => ["-9", "-KILL", "-SIGKILL", "--signal=KILL"].includes(a));
  if (force && program === "killall") {
    return { rule: "kill_all", reason: "force-kills every process of a name" };
  }
  return null;
}

function serviceRule(program: string, args: string[]): DangerMatch | null {
  const verb = args.find((a) => !a.startsWith("-"));
  const read = verb === undefined || SYSTEMCTL_READ.has(verb) || /^(is-|list-)/.test(verb);
  const serviceRead = program === "service" && /^(status|--status-all)$/.test(args.at(-1) ?? "");
  if (read || serviceRead) return null;
  return { rule: "systemctl", reason: `${program} ${verb} changes services` };
}

/** Anything but listing (`-l`) replaces or removes the cron jobs: `crontab -`, `crontab file`. */
function crontabRule(args: string[]): DangerMatch | null {
  const rest: string[] = [];
  for (let i = 0; i < args.length; i++) {
    if (args[i] === "-u") i++;
    else rest.push(args[i]!);
  }
  if (rest.some((a) => /^-[a-zA-Z]*r/.test(a))) {
    return { rule: "crontab_remove", reason: "removes every cron job" };
  }
  if (rest.length > 0 && rest.every((a) => /^-[lV]+$/.test(a))) return null;
  return crontabInstall;
}

const crontabInstall: DangerMatch = {
  rule: "crontab_install",
  reason: "replaces the cron jobs (commands that run later, unasked)",
};
