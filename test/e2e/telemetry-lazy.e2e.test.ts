/**
 * The OpenTelemetry SDK is loaded only when `telemetry.otlp_endpoint` is set: the built gateway
 * is started with a module hook that logs every module it loads, with and without the setting.
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { afterEach, describe, expect, it } from "vitest";
import { type GatewayProcess, REPO_ROOT, startGatewayProcess } from "../helpers/gateway-process.js";
import { createTempDir } from "../helpers/temp-home.js";
import { waitFor } from "../helpers/wait-for.js";

const REGISTER = join(REPO_ROOT, "test/fixtures/module-log/register.mjs");

let gateway: GatewayProcess | undefined;
let dir: { path: string; cleanup(): void } | undefined;

afterEach(async () => {
  await gateway?.stop();
  gateway = undefined;
  dir?.cleanup();
  dir = undefined;
});

/** The modules a started gateway loaded that hold the tracing SDK's code. */
async function startLogged(env: Record<string, string>): Promise<() => string[]> {
  dir = createTempDir("keel-lazy-otel-");
  const log = join(dir.path, "modules.txt");
  gateway = await startGatewayProcess({
    env: { ...env, NODE_OPTIONS: `--import=${REGISTER}`, KEEL_TEST_MODULE_LOG: log },
  });
  expect(await gateway.waitForRunning(20_000)).toBe(true);
  const urls = () => (existsSync(log) ? readFileSync(log, "utf8").split("\n").filter(Boolean) : []);
  // The bundle's own entry was logged: the hook works.
  expect(urls().some((u) => u.endsWith("/dist/bundle/main.js"))).toBe(true);
  // The SDK's own code: the gateway's code names BatchSpanProcessor too, where it loads the SDK.
  return () =>
    urls().filter(
      (url) =>
        url.startsWith("file:") &&
        readFileSync(new URL(url), "utf8").includes("BatchSpanProcessorBase"),
    );
}

describe("the tracing SDK", () => {
  it("is not loaded without telemetry.otlp_endpoint", async () => {
    const sdkModules = await startLogged({});
    // A turn's worth of settling: a lazy import started at all would have loaded by then.
    await sleep(1000);
    expect(sdkModules()).toEqual([]);
  });

  it("is loaded with it", async () => {
    const sdkModules = await startLogged({ KEEL_OTLP_ENDPOINT: "http://127.0.0.1:9/" });
    const loaded = await waitFor(() => (sdkModules().length > 0 ? sdkModules() : null), {
      timeoutMs: 10_000,
      intervalMs: 100,
      message: "the SDK's modules loaded",
    });
    expect(loaded.length).toBeGreaterThan(0);
  });
});
