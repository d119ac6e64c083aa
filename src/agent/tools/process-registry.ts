/** The live process groups started by tools, so that a stopping gateway can kill them all. */
export interface ProcessRegistry {
  /** Records a process group by its leader's pid (the group id). */
  add(pgid: number): void;
  /** Forgets a group once nothing in it is left to kill. */
  delete(pgid: number): void;
  /** Groups still recorded. */
  readonly size: number;
  /**
   * Sends SIGKILL to every recorded group and forgets them; returns how many groups were
   * signalled (a group that had already ended is not counted). Synchronous and idempotent.
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

/** Creates an empty registry; the gateway owns one and passes it to the terminal tool. */
export function createProcessRegistry(): ProcessRegistry {
  const groups = new Set<number>();
  return {
    add(pgid) {
      // Drop groups that ended on their own, so a reused pid is never signalled by mistake.
      for (const known of groups) if (!isGroupAlive(known)) groups.delete(known);
      groups.add(pgid);
    },
    delete(pgid) {
      groups.delete(pgid);
    },
    get size() {
      return groups.size;
    },
    killAll() {
      let signalled = 0;
      for (const pgid of groups) if (signalGroup(pgid, "SIGKILL")) signalled++;
      groups.clear();
      return signalled;
    },
  };
}
