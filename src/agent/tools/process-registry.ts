/**
 * The live processes started by tools, so that an interrupt or a stopping gateway can kill them
 * all. A command runs in its own process group, but a process that calls `setsid` or is
 * double-forked leaves that group. So every tool run also carries a marker in its environment,
 * which its descendants inherit; on Linux the kill paths also find marked processes through
 * /proc/<pid>/environ. Elsewhere (macOS) only the process group is reached. A process that
 * clears its own environment escapes the marker too: the terminal tool is a shell. Only the kill
 * paths scan /proc (about 25 ms for 150 processes); a command's normal end checks its group alone.
 */
import { randomBytes } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";

/** The environment variable that marks a tool run's processes. */
export const TOOL_RUN_VARIABLE = "KEEL_TOOL_RUN";

/** One command started by a tool: its process group and the marker in its environment. */
export interface ToolRun {
  /** The process group id (the pid of the shell that leads it). */
  pgid: number;
  /** Value of {@link TOOL_RUN_VARIABLE} in the run's environment. */
  marker: string;
}

export interface ProcessRegistry {
  /** A fresh marker for the next run; put it in the environment as {@link TOOL_RUN_VARIABLE}. */
  newMarker(): string;
  /** Records a started run. */
  add(run: ToolRun): void;
  /** Forgets a run whose process group has ended (escaped processes are found by marker). */
  delete(run: ToolRun): void;
  /** Runs whose process group is still recorded. */
  readonly size: number;
  /**
   * Sends SIGKILL to every recorded group and to every process carrying one of this registry's
   * markers, and forgets the runs; returns how many runs were signalled (one that had already
   * ended is not counted). Synchronous and idempotent.
   */
  killAll(): number;
}

/** True while at least one process of the group exists. */
export function isGroupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch (error) {
    // EPERM means the group exists but belongs to someone else; it is alive all the same.
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** Sends a signal to a whole process group; false when the group is already gone. */
export function signalGroup(pgid: number, signal: NodeJS.Signals): boolean {
  try {
    process.kill(-pgid, signal);
    return true;
  } catch {
    // ESRCH: every process of the group has exited, which is what we wanted.
    return false;
  }
}

/** A live process found carrying a tool-run marker. */
export interface MarkedProcess {
  pid: number;
  marker: string;
}

/**
 * The live processes whose environment has {@link TOOL_RUN_VARIABLE} set to a value `matches`
 * accepts. Linux only (/proc); elsewhere, or when /proc is not readable, none. Synchronous, so
 * the stop path can use it.
 */
export function findMarkedProcesses(matches: (marker: string) => boolean): MarkedProcess[] {
  let entries: string[];
  try {
    entries = readdirSync("/proc");
  } catch {
    return [];
  }
  const prefix = `${TOOL_RUN_VARIABLE}=`;
  const found: MarkedProcess[] = [];
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    let environ: string;
    try {
      environ = readFileSync(`/proc/${entry}/environ`, "latin1");
    } catch {
      continue; // Gone meanwhile, or not ours to read.
    }
    const variable = environ.split("\0").find((v) => v.startsWith(prefix));
    const marker = variable?.slice(prefix.length);
    if (marker !== undefined && matches(marker)) found.push({ pid: Number(entry), marker });
  }
  return found;
}

/**
 * Signals a run: its process group and every process carrying its marker (those that left the
 * group). Returns false when nothing of the run was left.
 */
export function signalRun(run: ToolRun, signal: NodeJS.Signals): boolean {
  let signalled = signalGroup(run.pgid, signal);
  for (const { pid } of findMarkedProcesses((marker) => marker === run.marker)) {
    signalled = signalProcess(pid, signal) || signalled;
  }
  return signalled;
}

function signalProcess(pid: number, signal: NodeJS.Signals | 0): boolean {
  try {
    process.kill(pid, signal);
    return true;
  } catch {
    return false;
  }
}

/** Creates an empty registry; the gateway owns one and passes it to the terminal tool. */
export function createProcessRegistry(): ProcessRegistry {
  // Random per registry, so two gateways (or tests) in one process never kill each other's runs.
  const id = randomBytes(6).toString("hex");
  let counter = 0;
  const runs = new Map<string, ToolRun>();
  return {
    newMarker() {
      counter += 1;
      return `${id}-${counter}`;
    },
    add(run) {
      // Drop groups that ended on their own, so a reused pid is never signalled by mistake.
      for (const [marker, known] of runs) if (!isGroupAlive(known.pgid)) runs.delete(marker);
      runs.set(run.marker, run);
    },
    delete(run) {
      runs.delete(run.marker);
    },
    get size() {
      return runs.size;
    },
    killAll() {
      const marked = findMarkedProcesses((marker) => marker.startsWith(`${id}-`));
      const signalled = new Set<string>();
      for (const run of runs.values()) {
        if (signalGroup(run.pgid, "SIGKILL")) signalled.add(run.marker);
      }
      // Marked processes of runs whose group ended (setsid, double fork) are killed too: the
      // scan finds them by this registry's prefix, recorded or not.
      for (const { pid, marker } of marked) {
        if (signalProcess(pid, "SIGKILL")) signalled.add(marker);
      }
      runs.clear();
      return signalled.size;
    },
  };
}
