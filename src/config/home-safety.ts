/**
 * Whether the Keel home is this user's alone, checked before anything in it is read: the home
 * holds `config.yaml` (which names the commands MCP servers run) and `control_token` (which opens
 * every route). A home another user owns, or one others can write to (or whose parent folders let
 * others swap it), could hold files planted by someone else, so Keel refuses to start there
 * (exit 78) rather than tighten it and carry on. A `control_token` that is not this user's
 * private regular file is never adopted either. Each problem names the fix to run.
 */
import { lstatSync, realpathSync, type Stats, statSync } from "node:fs";
import { userInfo } from "node:os";
import { dirname } from "node:path";

/** Who the checks protect: the process's user (undefined where there are no uids, e.g. Windows). */
export interface HomeOwner {
  uid: number;
  name: string;
}

/** The running process's user, or null where the platform has no uids. */
export function currentOwner(): HomeOwner | null {
  const uid = process.getuid?.();
  if (uid === undefined) return null;
  let name = String(uid);
  try {
    name = userInfo().username;
  } catch {
    // A uid with no passwd entry (some containers): the number works for chown too.
  }
  return { uid, name };
}

const GROUP_OR_OTHER_WRITE = 0o022;
const STICKY = 0o1000;

/**
 * The problems of `home` (an existing folder) and the folders above it; empty when it is safe.
 * A sticky folder (such as `/tmp`) above it is fine: others cannot rename what they do not own.
 */
export function homeProblems(home: string, owner: HomeOwner): string[] {
  const problems: string[] = [];
  const info = statSync(home);
  const label = `${home} (the Keel home)`;
  if (info.uid !== owner.uid) {
    problems.push(
      `${label} belongs to user ${info.uid}, not to ${owner.name} (${owner.uid}), who runs Keel: ` +
        `files in it may have been put there by someone else. If they are yours, run ` +
        `\`sudo chown -R ${owner.name} ${home}\`; otherwise choose another home (--home, KEEL_HOME)`,
    );
  } else if (info.mode & GROUP_OR_OTHER_WRITE) {
    problems.push(
      `${label} is writable by ${whoMayWrite(info)} (mode ${octal(info.mode)}): anyone who can ` +
        `write there can plant a control_token or config.yaml. Run \`chmod 700 ${home}\` and check ` +
        `its files`,
    );
  }
  for (const parent of parentsOf(realpathSync(home))) {
    const p = statSync(parent);
    if (p.uid !== 0 && p.uid !== owner.uid) {
      problems.push(
        `${parent}, a folder above the Keel home, belongs to user ${p.uid}, who could replace the ` +
          `home: run \`sudo chown ${owner.name} ${parent}\` or move the home (--home, KEEL_HOME)`,
      );
    } else if (p.mode & GROUP_OR_OTHER_WRITE && !(p.mode & STICKY)) {
      problems.push(
        `${parent}, a folder above the Keel home, is writable by ${whoMayWrite(p)} (mode ` +
          `${octal(p.mode)}), who could replace the home: run \`chmod go-w ${parent}\` or move the ` +
          `home (--home, KEEL_HOME)`,
      );
    }
  }
  return problems;
}

/**
 * Why the `control_token` file at `file` must not be adopted, or null when it may be (or does
 * not exist: then Keel writes a new one, privately).
 */
export function controlTokenProblem(file: string, owner: HomeOwner): string | null {
  let info: Stats;
  try {
    info = lstatSync(file);
  } catch {
    return null;
  }
  const replace = `Remove it (\`rm ${file}\`) and Keel writes a new one at the next start, or set control.token (KEEL_CONTROL_TOKEN)`;
  if (!info.isFile()) {
    return `${file} is not a regular file (a link or something else); Keel adopts only a token file it wrote itself. ${replace}`;
  }
  if (info.uid !== owner.uid) {
    return `${file} belongs to user ${info.uid}, not to ${owner.name} (${owner.uid}): someone else wrote this control token. ${replace}`;
  }
  if (info.mode & 0o077) {
    return (
      `${file} is open to ${info.mode & 0o070 ? "its group" : "other users"} (mode ${octal(info.mode)}): ` +
      `the token may be known to, or written by, someone else. ${replace}; if only you could ever ` +
      `read it, \`chmod 600 ${file}\` keeps it`
    );
  }
  return null;
}

/** The folders above `path`, nearest first, up to the root. */
function parentsOf(path: string): string[] {
  const parents: string[] = [];
  for (let dir = dirname(path); ; dir = dirname(dir)) {
    parents.push(dir);
    if (dirname(dir) === dir) return parents;
  }
}

function whoMayWrite(info: Stats): string {
  const group = (info.mode & 0o020) !== 0;
  const others = (info.mode & 0o002) !== 0;
  return group && others ? "its group and others" : group ? "its group" : "others";
}

function octal(mode: number): string {
  return `0${(mode & 0o7777).toString(8).padStart(3, "0")}`;
}
