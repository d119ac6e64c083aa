/**
 * The detached successor for a restart outside a service manager. The old gateway spawns a tiny
 * helper in its own session (so it is no child that dies with the old process group), the
 * helper waits until the old pid is gone, then starts the new gateway, detached as well, and
 * exits. Output of both goes to a log file.
 */
import { spawn } from "node:child_process";
import { closeSync, mkdirSync, openSync } from "node:fs";
import { dirname } from "node:path";

/**
 * The helper's program, run with `node -e`. Arguments: old pid, max wait (ms), node path, entry
 * script, JSON array of the entry's arguments, log file. Plain CommonJS so it needs no build.
 */
export const SUCCESSOR_HELPER_SCRIPT = `
const { spawn } = require("node:child_process");
const fs = require("node:fs");
const [pidText, maxWaitText, nodePath, entry, argsJson, logFile] = process.argv.slice(1);
const oldPid = Number(pidText);
const deadline = Date.now() + Number(maxWaitText);
function alive(pid) {
  try { process.kill(pid, 0); } catch (error) { return error.code === "EPERM"; }
  try {
    const stat = fs.readFileSync("/proc/" + pid + "/stat", "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2)[0] !== "Z";
  } catch { return true; }
}
function log(message) {
  fs.appendFileSync(logFile, JSON.stringify({ time: Date.now(), msg: message, oldPid }) + "\\n");
}
function tick() {
  if (alive(oldPid)) {
    if (Date.now() < deadline) return void setTimeout(tick, 200);
    log("restart helper: old gateway still alive, starting the successor anyway");
  }
  const out = fs.openSync(logFile, "a");
  const child = spawn(nodePath, [entry, ...JSON.parse(argsJson)], { detached: true, stdio: ["ignore", out, out] });
  child.on("error", (error) => log("restart helper: successor failed to start: " + error.message));
  child.unref();
  log("restart helper: successor started");
}
tick();
`;

export interface DetachedSuccessorOptions {
  /** The node binary (`process.execPath`). */
  nodePath: string;
  /** The script the successor runs, e.g. the absolute path of `bin/keel.js`. */
  entry: string;
  /** Its arguments, e.g. `["gateway", "run", "--home", home]`. */
  args: string[];
  /** The old gateway's pid: the successor starts once it is gone. */
  waitForPid: number;
  /** Where helper and successor output goes (appended; folder created). */
  logFile: string;
  /** Start the successor anyway after this long. Default 120 s. */
  maxWaitMs?: number;
  /** Environment for helper and successor; defaults to this process's. */
  env?: NodeJS.ProcessEnv;
}

/**
 * Spawns the restart helper in a new session with no ties to this process (stdio to the log
 * file, unref'd), and returns its pid. Never throws for the successor's own failures: those
 * are written to the log file.
 */
export function spawnDetachedSuccessor(options: DetachedSuccessorOptions): {
  pid: number | undefined;
} {
  mkdirSync(dirname(options.logFile), { recursive: true, mode: 0o700 });
  // Created private here, so the helper's own appends find it so.
  const out = openSync(options.logFile, "a", 0o600);
  try {
    const helper = spawn(
      options.nodePath,
      [
        "-e",
        SUCCESSOR_HELPER_SCRIPT,
        String(options.waitForPid),
        String(options.maxWaitMs ?? 120_000),
        options.nodePath,
        options.entry,
        JSON.stringify(options.args),
        options.logFile,
      ],
      { detached: true, stdio: ["ignore", out, out], ...(options.env ? { env: options.env } : {}) },
    );
    helper.unref();
    return { pid: helper.pid };
  } finally {
    closeSync(out);
  }
}
