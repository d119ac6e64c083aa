/**
 * A Dovecot of the test's own (Debian's `dovecot-imapd`), for the email adapter's tests: a
 * configuration in a temporary folder, IMAP on a free 127.0.0.1 port, users from a passwd-file,
 * maildirs in the folder, run in the foreground as the current user (no system service). As
 * root, the login processes run as Debian's `dovenull` and the mail belongs to its `dovecot` user
 * (Dovecot refuses mail owned by uid 0). Mail reaches a mailbox
 * through Dovecot's own delivery agent (`dovecot-lda`, what an MTA hands a local delivery to).
 */
import { type ChildProcess, execFile, execFileSync, spawn } from "node:child_process";
import { chmodSync, chownSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { createConnection, createServer } from "node:net";
import { userInfo } from "node:os";
import { join } from "node:path";
import { createTempDir } from "./temp-home.js";
import { waitFor } from "./wait-for.js";

export interface MailUser {
  /** The login name (the local part of the address). */
  user: string;
  password: string;
  address: string;
}

export interface PrivateDovecot {
  readonly imapPort: number;
  /** The mail domain every user's address is in. */
  readonly domain: string;
  user(name: string): MailUser;
  /** Delivers a raw message into the mailboxes of `to` through `dovecot-lda`, as an MTA would. */
  deliver(raw: string | Buffer, to: string[], from?: string): Promise<void>;
  /** Dovecot's own log, for a failing test's message. */
  log(): string;
  stop(): Promise<void>;
}

export const DOVECOT_BINARY = "/usr/sbin/dovecot";
const LDA_BINARY = "/usr/lib/dovecot/dovecot-lda";

/** True when Debian's Dovecot (with IMAP) is installed. */
export function dovecotInstalled(): boolean {
  return existsSync(DOVECOT_BINARY) && existsSync("/usr/lib/dovecot/imap");
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      const port = typeof address === "object" && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

function listening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ host: "127.0.0.1", port });
    socket.once("connect", () => {
      socket.destroy();
      resolve(true);
    });
    socket.once("error", () => resolve(false));
  });
}

/** Who owns the mail: the current user, or (Dovecot refuses uid 0) Debian's `dovecot` as root. */
function mailOwner(): { uid: number; gid: number; asRoot: boolean; username: string } {
  const me = userInfo();
  if (me.uid !== 0) return { uid: me.uid, gid: me.gid, asRoot: false, username: me.username };
  const [, , uid, gid] = execFileSync("getent", ["passwd", "dovecot"], { encoding: "utf8" }).split(
    ":",
  );
  return { uid: Number(uid), gid: Number(gid), asRoot: true, username: "dovecot" };
}

function config(dir: string, imapPort: number): string {
  const me = mailOwner();
  const asRoot = me.asRoot;
  return `
base_dir = ${dir}/run
state_dir = ${dir}/state
log_path = ${dir}/dovecot.log
protocols = imap
listen = 127.0.0.1
ssl = no
disable_plaintext_auth = no
auth_mechanisms = plain login
auth_username_format = %Ln
first_valid_uid = ${me.uid}
last_valid_uid = ${me.uid}
first_valid_gid = ${me.gid}
mail_location = maildir:${dir}/mail/%n
mail_fsync = never
${asRoot ? "" : `default_login_user = ${me.username}\ndefault_internal_user = ${me.username}`}
passdb {
  driver = passwd-file
  args = scheme=PLAIN username_format=%Ln ${dir}/users
}
userdb {
  driver = static
  args = uid=${me.uid} gid=${me.gid} home=${dir}/home/%Ln
}
service imap-login {
  inet_listener imap {
    address = 127.0.0.1
    port = ${imapPort}
  }
  inet_listener imaps {
    port = 0
  }
}
protocol lda {
  postmaster_address = postmaster@example.test
}
`;
}

/** Starts a Dovecot with the named users (password `secret-<name>`), at `<name>@example.test`. */
export async function startPrivateDovecot(users: string[]): Promise<PrivateDovecot> {
  if (!dovecotInstalled()) throw new Error(`Dovecot is not installed (${DOVECOT_BINARY})`);
  const home = createTempDir("keel-dovecot-");
  const dir = home.path;
  // Dovecot's auth process runs as its own user under root: it must reach the passwd-file.
  chmodSync(dir, 0o755);
  const owner = mailOwner();
  for (const sub of ["run", "state", "mail", "home"]) mkdirSync(join(dir, sub));
  for (const sub of ["mail", "home"]) chownSync(join(dir, sub), owner.uid, owner.gid);
  const domain = "example.test";
  const passwords = new Map(users.map((u) => [u, `secret-${u}`]));
  writeFileSync(join(dir, "users"), [...passwords].map(([u, p]) => `${u}:${p}::::::\n`).join(""), {
    mode: 0o644,
  });
  const imapPort = await freePort();
  const conf = join(dir, "dovecot.conf");
  writeFileSync(conf, config(dir, imapPort));
  const child: ChildProcess = spawn(DOVECOT_BINARY, ["-F", "-c", conf], {
    stdio: ["ignore", "ignore", "pipe"],
  });
  let stderr = "";
  child.stderr?.on("data", (chunk) => {
    stderr += String(chunk);
  });
  const log = () => {
    const file = join(dir, "dovecot.log");
    return `${stderr}${existsSync(file) ? readFileSync(file, "utf8") : ""}`;
  };
  try {
    await waitFor(
      async () => {
        if (child.exitCode !== null) throw new Error(`dovecot exited: ${log()}`);
        return listening(imapPort);
      },
      { timeoutMs: 15_000, message: "dovecot listening" },
    );
  } catch (err) {
    child.kill("SIGKILL");
    home.cleanup();
    throw new Error(`${(err as Error).message}\n${log()}`);
  }
  return {
    imapPort,
    domain,
    user(name) {
      const password = passwords.get(name);
      if (!password) throw new Error(`no mail user ${name}`);
      return { user: name, password, address: `${name}@${domain}` };
    },
    async deliver(raw, to, from = `sender@${domain}`) {
      for (const address of to) {
        await lda(conf, address.split("@")[0]!, from, raw);
      }
    },
    log,
    async stop() {
      if (child.exitCode === null) {
        const exited = new Promise((resolve) => child.once("exit", resolve));
        child.kill("SIGTERM");
        await Promise.race([exited, new Promise((r) => setTimeout(r, 5_000))]);
        if (child.exitCode === null) child.kill("SIGKILL");
      }
      home.cleanup();
    },
  };
}

/** One local delivery: the raw message on the agent's standard input. */
function lda(conf: string, user: string, from: string, raw: string | Buffer): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = execFile(
      LDA_BINARY,
      ["-c", conf, "-d", user, "-f", from],
      { timeout: 15_000 },
      (err, _stdout, stderr) => {
        if (err) reject(new Error(`dovecot-lda for ${user} failed: ${err.message} ${stderr}`));
        else resolve();
      },
    );
    child.stdin!.end(raw);
  });
}
