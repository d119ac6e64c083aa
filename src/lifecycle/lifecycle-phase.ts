/** The watchers' loop (the gateway's state itself is in lifecycle.ts). */

/** A background poller; `stop()` resolves once no further callback can run. */
export interface Watcher {
  stop(): Promise<void>;
}

/**
 * Runs `tick` now and then every `intervalMs` after the previous tick finished, until `tick`
 * returns `"done"` or `stop()` is called (`tick` can ask whether it has been). `stop()` cancels the pending wait at once and waits
 * only for a tick already under way.
 */
export function startPolling(
  tick: (isStopped: () => boolean) => Promise<"continue" | "done">,
  intervalMs: number,
): Watcher {
  let stopped = false;
  let timer: NodeJS.Timeout | null = null;
  let inFlight: Promise<void> | null = null;

  const run = (): void => {
    timer = null;
    inFlight = tick(() => stopped).then(
      (outcome) => {
        inFlight = null;
        if (outcome === "continue" && !stopped) timer = setTimeout(run, intervalMs);
      },
      () => {
        // tick() handles its own errors; a rejection here is a bug, but polling must go on.
        inFlight = null;
        if (!stopped) timer = setTimeout(run, intervalMs);
      },
    );
  };
  run();

  return {
    async stop() {
      stopped = true;
      if (timer !== null) clearTimeout(timer);
      timer = null;
      await inFlight;
    },
  };
}
