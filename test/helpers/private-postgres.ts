/**
 * A Postgres server of the test's own (for tests that stop and start the database): `initdb` on a
 * temporary folder, `pg_ctl start` on a free 127.0.0.1 port, trust authentication, fsync on (a
 * real server's settings). As root, the server must not run as root: the folder is given to the
 * `postgres` user and every command runs as that user (`runuser`).
 */
import { execFile } from "node:child_process";
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";

const run = promisify(execFile);

export interface PrivatePostgres {
  readonly port: number;
  /** postgres://postgres@127.0.0.1:<port>/postgres */
  readonly url: string;
  /** `pg_ctl stop -m <mode>`: `fast` ends sessions cleanly, `immediate` is a crash of the server. */
  stop(mode: "fast" | "immediate"): Promise<void>;
  start(): Promise<void>;
  /** The server's own log (for a failing test's message). */
  log(): Promise<string>;
  /** Stops it (immediate) and removes its folder. */
  destroy(): Promise<void>;
}

/** The newest installed server's binaries, or null when none is installed. */
export function postgresBinDir(): string | null {
  const root = "/usr/lib/postgresql";
  if (!existsSync(root)) return null;
  const versions = readdirSync(root)
    .filter((v) => existsSync(join(root, v, "bin", "initdb")))
    .sort((a, b) => Number(b) - Number(a));
  return versions[0] ? join(root, versions[0], "bin") : null;
}

async function freePort(): Promise<number> {
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

export async function startPrivatePostgres(): Promise<PrivatePostgres> {
  const bin = postgresBinDir();
  if (!bin) throw new Error("no Postgres server binaries under /usr/lib/postgresql/*/bin");
  const dir = mkdtempSync(join(tmpdir(), "keel-pg-"));
  const data = join(dir, "data");
  const logFile = join(dir, "server.log");
  const asRoot = process.getuid?.() === 0;
  if (asRoot) {
    const { stdout } = await run("id", ["-u", "postgres"]);
    const { stdout: gid } = await run("id", ["-g", "postgres"]);
    chownSync(dir, Number(stdout.trim()), Number(gid.trim()));
  }
  const pg = (tool: string, args: string[]) =>
    asRoot
      ? run("runuser", ["-u", "postgres", "--", join(bin, tool), ...args])
      : run(join(bin, tool), args);
  await pg("initdb", ["-D", data, "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8"]);
  const port = await freePort();
  const options = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1`;
  const start = async () => {
    await pg("pg_ctl", ["start", "-w", "-t", "60", "-D", data, "-l", logFile, "-o", options]);
  };
  await start();
  return {
    port,
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    start,
    stop: async (mode) => {
      await pg("pg_ctl", ["stop", "-w", "-t", "60", "-D", data, "-m", mode]);
    },
    log: async () => (await run("cat", [logFile])).stdout,
    destroy: async () => {
      await pg("pg_ctl", ["stop", "-w", "-D", data, "-m", "immediate"]).catch(() => {});
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
