/**
 * A start that fails half-way closes through the same stop path as a stop: what had started is
 * closed, in reverse order, and the home is free for the next start.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config/load-config.js";
import { readPidFile } from "../../src/lifecycle/pid-file.js";
import { readRuntimeStatus } from "../../src/lifecycle/runtime-status.js";
import {
  CountingAdapter,
  createTestGateway,
  startInProcessGateway,
} from "../helpers/in-process-gateway.js";
import { createTempDir } from "../helpers/temp-home.js";

/** A platform whose connection fails outright at start. */
class BrokenAdapter extends CountingAdapter {
  override async start(): Promise<void> {
    throw new Error("platform refused the connection");
  }
}

describe("a failed start", () => {
  let dir: ReturnType<typeof createTempDir>;

  beforeEach(() => {
    dir = createTempDir();
  });
  afterEach(() => dir.cleanup());

  it("disconnects the platforms, reports startup_failed, and frees the pid file and the store", async () => {
    const { config } = loadConfig({
      home: dir.path,
      env: { KEEL_HTTP_PORT: "0", KEEL_WEBCHAT_ENABLED: "false" },
    });
    const healthy = new CountingAdapter("healthy");
    const broken = new BrokenAdapter("broken");
    const gateway = createTestGateway(config, { extraAdapters: [healthy, broken] });

    await expect(gateway.start()).rejects.toThrow("platform refused the connection");

    // The platform that had connected was disconnected once; the broken one was told to stop too.
    expect(healthy.stops).toBe(1);
    expect(broken.stops).toBe(1);
    expect((await readRuntimeStatus(dir.path))?.gateway_state).toBe("startup_failed");
    expect(await readPidFile(dir.path)).toBeNull();
    // A stop asked for afterwards has nothing left to do.
    gateway.requestStop({ restart: false, signalInitiated: false });
    expect(await gateway.exited).toBe(1);

    // The home is free: the next gateway starts on it (pid file and store were released).
    const next = await startInProcessGateway({ home: dir.path });
    expect(next.gateway.isReady()).toBe(true);
    await next.shutdown();
  });
});
