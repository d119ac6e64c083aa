/**
 * This home's previous gateway on a shared store: who it was (instance id, host, pid, process
 * start, boot), written to the home when a gateway joins, and whether it is provably gone. A
 * gateway restarted after a crash gets a new instance id (the default one carries its pid), so
 * without this it would wait out its own dead predecessor's leases (the lease TTL) like any
 * survivor. Proof, not a guess: the same home (the record is in it), the same host and boot, and
 * the process is gone — no process with that pid, or one that started at another time (the pid
 * was reused). Anything less (another host, an unreadable start time) leaves the TTL in force.
 */
import { readFile, rename, writeFile } from "node:fs/promises";
import { hostname } from "node:os";
import { join } from "node:path";
import { isProcessAlive, readProcessStartTime, sameStartTime } from "../lifecycle/process-info.js";

export const PREDECESSOR_FILE = "cluster_instance.json";

export interface InstanceIdentity {
  id: string;
  host: string;
  pid: number;
  /** The process's start (epoch ms, from the OS), or null where it cannot be read. */
  processStart: number | null;
  /** The kernel's boot id (Linux), or null. */
  bootId: string | null;
}

/** This process as the record names it. */
export async function currentIdentity(id: string): Promise<InstanceIdentity> {
  return {
    id,
    host: hostname(),
    pid: process.pid,
    processStart: await readProcessStartTime(process.pid),
    bootId: await readBootId(),
  };
}

/** Notes this gateway as the home's current one (replacing the record atomically). */
export async function recordIdentity(home: string, identity: InstanceIdentity): Promise<void> {
  const path = join(home, PREDECESSOR_FILE);
  const temp = `${path}.${process.pid}.tmp`;
  await writeFile(temp, `${JSON.stringify(identity)}\n`, { mode: 0o600 });
  await rename(temp, path);
}

/** The gateway this home ran before, or null (none recorded, or an unreadable record). */
export async function readPredecessor(home: string): Promise<InstanceIdentity | null> {
  let raw: string;
  try {
    raw = await readFile(join(home, PREDECESSOR_FILE), "utf8");
  } catch {
    return null;
  }
  try {
    const value = JSON.parse(raw) as Partial<InstanceIdentity>;
    if (typeof value.id !== "string" || typeof value.host !== "string") return null;
    if (typeof value.pid !== "number") return null;
    return {
      id: value.id,
      host: value.host,
      pid: value.pid,
      processStart: typeof value.processStart === "number" ? value.processStart : null,
      bootId: typeof value.bootId === "string" ? value.bootId : null,
    };
  } catch {
    return null;
  }
}

export type DeathProof = "process_gone" | "pid_reused" | "rebooted";

/**
 * How `predecessor` is known to be dead, judged from this process (same home: the caller read
 * the record from it), or null when that cannot be proven.
 */
export async function provenDead(
  predecessor: InstanceIdentity,
  self: InstanceIdentity,
): Promise<DeathProof | null> {
  // A pid equal to ours is no exception: in a container the gateway often has the same pid at
  // every start, and the start time below tells the two processes apart.
  if (predecessor.host !== self.host) return null;
  if (predecessor.bootId !== null && self.bootId !== null && predecessor.bootId !== self.bootId)
    return "rebooted";
  if (!(await isProcessAlive(predecessor.pid))) return "process_gone";
  // A process with that pid runs: the predecessor only if it started when the record says.
  if (predecessor.processStart === null) return null;
  const start = await readProcessStartTime(predecessor.pid);
  if (start === null) return null;
  return sameStartTime(start, predecessor.processStart) ? null : "pid_reused";
}

async function readBootId(): Promise<string | null> {
  if (process.platform !== "linux") return null;
  try {
    return (await readFile("/proc/sys/kernel/random/boot_id", "utf8")).trim() || null;
  } catch {
    return null;
  }
}
