/**
 * `keel gateway drain [--cancel]`: asks the running gateway over the control API; when it does
 * not answer, writes or removes `.drain_request.json` itself (a running gateway's watcher, or the
 * next start, picks it up).
 */
import { removeDrainRequest, writeDrainRequest } from "../lifecycle/markers.js";
import { callControlApi, fetchOwnApiStatus, liveGateway } from "./gateway-probe.js";
import { type CliIo, EXIT } from "./io.js";
import { type GlobalOptions, loadForControl } from "./load.js";

const DRAINING_TEXT =
  "Gateway draining: running turns finish, new turns are refused. Cancel with `keel gateway drain --cancel`.";
const CANCELLED_TEXT = "Drain cancelled: the gateway accepts new turns again.";

export async function gatewayDrain(
  options: GlobalOptions & { cancel?: boolean },
  io: CliIo,
): Promise<number> {
  const { config } = await loadForControl(options, io);
  const action = options.cancel ? "cancel" : "drain";
  const live = await liveGateway(config.home);
  // The control API only of this home's gateway (another may answer on the same port); the
  // marker reaches this home's gateway in any case.
  if (live !== null && (await fetchOwnApiStatus(config, live)) !== null) {
    const answer = await callControlApi(config, "/api/gateway/drain", {
      method: "POST",
      body: { action },
    });
    if (answer?.status === 200) {
      const draining = (answer.body as { draining?: unknown }).draining === true;
      io.out(draining ? DRAINING_TEXT : CANCELLED_TEXT);
      if (action === "drain" && !draining) {
        io.err("The gateway is not running normally (starting or stopping); the request is kept.");
      }
      return EXIT.ok;
    }
    if (answer !== null) {
      io.err(
        `warning: the control API answered ${answer.status}; using ${config.home}/.drain_request.json instead`,
      );
    }
  }
  if (action === "drain") {
    await writeDrainRequest(config.home, { requested_at: Date.now(), via: "cli" });
    io.out(
      live === null
        ? "Drain requested: the gateway is not running; its next start begins drained."
        : `Drain requested through .drain_request.json: the gateway (pid ${live.pid}) stops taking new turns within a second.`,
    );
  } else {
    const removed = await removeDrainRequest(config.home);
    io.out(removed ? CANCELLED_TEXT : "No drain was requested.");
  }
  return EXIT.ok;
}
