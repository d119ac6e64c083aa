import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";

/** A real child process that sleeps until killed; `extraArgs` shape its command line. */
export interface Sleeper {
  child: ChildProcess;
  pid: number;
  kill(signal?: NodeJS.Signals): Promise<void>;
}

export async function spawnSleeper(extraArgs: string[] = []): Promise<Sleeper> {
  const child = spawn(process.execPath, ["-e", "setInterval(() => {}, 1e6)", ...extraArgs], {
    stdio: "ignore",
  });
  await once(child, "spawn");
  const pid = child.pid;
  if (pid === undefined) throw new Error("sleeper did not start");
  return {
    child,
    pid,
    async kill(signal: NodeJS.Signals = "SIGKILL") {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = once(child, "exit");
      child.kill(signal);
      await exited;
    },
  };
}
