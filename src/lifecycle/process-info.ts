/**
 * What the operating system says about a process: is it alive, when did it start, what is its
 * command line. Start time plus pid identifies a process across pid reuse. Linux reads /proc;
 * other systems ask `ps`.
 */
import { execFile } from "node:child_process";
import { readFile } from "node:fs/promises";
import { promisify } from "node:util";

const execFileAsync = promisify(execFile);

/** Linux reports process start in clock ticks since boot; USER_HZ is 100 on every mainstream build. */
const CLOCK_TICKS_PER_SECOND = 100;

/** Start times closer than this are the same process (/proc/stat `btime` may shift by a second). */
export const START_TIME_TOLERANCE_MS = 1000;

/** True when a process with `pid` exists and is not a zombie. */
export async function isProcessAlive(pid: number): Promise<boolean> {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
  } catch (error) {
    // EPERM: it exists but belongs to someone else.
    if ((error as NodeJS.ErrnoException).code !== "EPERM") return false;
  }
  const stat = await readProcStat(pid);
  return stat === null || stat.state !== "Z";
}

/** The process's start time in epoch milliseconds, or null when it cannot be read. */
export async function readProcessStartTime(pid: number): Promise<number | null> {
  if (process.platform === "linux") {
    const stat = await readProcStat(pid);
    const bootTime = await readBootTimeSeconds();
    if (stat === null || bootTime === null) return null;
    return bootTime * 1000 + Math.round((stat.startTicks * 1000) / CLOCK_TICKS_PER_SECOND);
  }
  const out = await runPs(pid, "lstart=");
  if (out === null) return null;
  const parsed = Date.parse(out);
  return Number.isNaN(parsed) ? null : parsed;
}

/** The process's command line as an argv array, or null when it cannot be read. */
export async function readProcessArgv(pid: number): Promise<string[] | null> {
  if (process.platform === "linux") {
    try {
      const raw = await readFile(`/proc/${pid}/cmdline`, "utf8");
      return raw.split("\0").filter((part) => part.length > 0);
    } catch {
      return null;
    }
  }
  const out = await runPs(pid, "command=");
  return out === null ? null : out.split(/\s+/).filter((part) => part.length > 0);
}

/** True when two start times (epoch ms) name the same process start. */
export function sameStartTime(a: number, b: number): boolean {
  return Math.abs(a - b) <= START_TIME_TOLERANCE_MS;
}

interface ProcStat {
  state: string;
  startTicks: number;
}

async function readProcStat(pid: number): Promise<ProcStat | null> {
  if (process.platform !== "linux") return null;
  let raw: string;
  try {
    raw = await readFile(`/proc/${pid}/stat`, "utf8");
  } catch {
    return null;
  }
  // The command name (field 2) may contain spaces and parentheses; fields after it are plain.
  const rest = raw.slice(raw.lastIndexOf(")") + 2).split(" ");
  const state = rest[0];
  const startTicks = Number(rest[19]);
  if (state === undefined || !Number.isFinite(startTicks)) return null;
  return { state, startTicks };
}

async function readBootTimeSeconds(): Promise<number | null> {
  try {
    const raw = await readFile("/proc/stat", "utf8");
    const match = /^btime (\d+)$/m.exec(raw);
    return match?.[1] === undefined ? null : Number(match[1]);
  } catch {
    return null;
  }
}

async function runPs(pid: number, format: string): Promise<string | null> {
  try {
    const { stdout } = await execFileAsync("ps", ["-o", format, "-p", String(pid)]);
    const text = stdout.trim();
    return text.length > 0 ? text : null;
  } catch {
    return null;
  }
}
