import { existsSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { DRAIN_REQUEST_FILE } from "../../src/lifecycle/markers.js";
import { type InProcessGateway, startInProcessGateway } from "../helpers/in-process-gateway.js";
import { createTempDir } from "../helpers/temp-home.js";

describe("lifecycle: the control API's drain, restart and stop routes", () => {
  let dir: ReturnType<typeof createTempDir>;
  let gw: InProcessGateway;

  function post(path: string, body: unknown, token: string | null = gw.controlToken) {
    return fetch(`${gw.url}${path}`, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        ...(token !== null && { authorization: `Bearer ${token}` }),
      },
      body: typeof body === "string" ? body : JSON.stringify(body),
    });
  }
  const marker = () => existsSync(join(dir.path, DRAIN_REQUEST_FILE));

  beforeEach(async () => {
    dir = createTempDir();
    gw = await startInProcessGateway({ home: dir.path });
  });
  afterEach(async () => {
    await gw.shutdown();
    dir.cleanup();
  });

  it("the drain action writes the drain marker", async () => {
    const res = await post("/api/gateway/drain", { action: "drain" });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ draining: true });
    expect(marker()).toBe(true);
  });

  it("drain without an action is 400", async () => {
    const res = await post("/api/gateway/drain", {});
    expect(res.status).toBe(400);
    expect(marker()).toBe(false);
  });

  it("cancel removes the drain marker", async () => {
    await post("/api/gateway/drain", { action: "drain" });
    const res = await post("/api/gateway/drain", { action: "cancel" });
    expect(await res.json()).toEqual({ draining: false });
    expect(marker()).toBe(false);
  });

  it("cancel without a drain succeeds", async () => {
    const res = await post("/api/gateway/drain", { action: "cancel" });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ draining: false });
  });

  it("an unknown drain action or a body that is not JSON is 400", async () => {
    expect((await post("/api/gateway/drain", { action: "pause" })).status).toBe(400);
    expect((await post("/api/gateway/drain", "{not json")).status).toBe(400);
    expect(marker()).toBe(false);
  });

  it("drain, restart and stop require the control token (401 with a JSON error)", async () => {
    for (const path of ["/api/gateway/drain", "/api/gateway/restart", "/api/gateway/stop"]) {
      for (const token of [null, "wrong-token-wrong-token"]) {
        const res = await post(path, { action: "drain" }, token);
        expect(res.status).toBe(401);
        expect(await res.json()).toHaveProperty("error");
      }
    }
    expect(marker()).toBe(false);
    expect(gw.gateway.isReady()).toBe(true);
  });

  it("POST /api/gateway/stop is a planned stop: exit 0, and a second request changes nothing", async () => {
    const first = await post("/api/gateway/stop", {});
    expect(first.status).toBe(202);
    expect(await first.json()).toMatchObject({ accepted: true });
    await expect(gw.gateway.stop()).resolves.toMatchObject({ accepted: false });
    expect(await gw.gateway.exited).toBe(0);
  });
});
