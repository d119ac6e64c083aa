// Preloaded into the benchmarked gateway (`node --import`): measures its event-loop delay and
// answers the bench over the IPC channel, so the product carries no benchmark code.
import { monitorEventLoopDelay } from "node:perf_hooks";

const RESOLUTION_MS = 10;
const histogram = monitorEventLoopDelay({ resolution: RESOLUTION_MS });
histogram.enable();
// The histogram records the time between its timer's runs, which includes the timer's own
// interval (an idle process reads p50 ≈ 10 ms): the delay is what exceeds it.
const ms = (ns) => Math.max(0, ns / 1e6 - RESOLUTION_MS);

process.on("message", (message) => {
  if (message?.probe === "reset") {
    histogram.reset();
    process.send({ probe: "reset" });
  } else if (message?.probe === "memory") {
    // With --expose-gc (a memory investigation), what is live rather than what is committed.
    globalThis.gc?.();
    process.send({ probe: "memory", ...process.memoryUsage() });
  } else if (message?.probe === "read") {
    process.send({
      probe: "read",
      p50: ms(histogram.percentile(50)),
      p99: ms(histogram.percentile(99)),
      max: ms(histogram.max),
    });
  }
});
// The channel must not keep the gateway alive, nor change how it stops.
process.channel?.unref();
