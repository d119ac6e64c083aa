/**
 * The dashboard of a gateway on a Postgres store shared with another gateway: both instances are
 * listed (this one marked); the other one SIGKILLed shows as dead with its last heartbeat, then
 * its row goes away once it has been silent long enough (its turns had nothing to take over).
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { type GatewayProcess, startGatewayProcess } from "../helpers/gateway-process.js";
import { createTestSchema, TEST_PG_URL } from "../helpers/store-harness.js";
import { type Harness, startHarness } from "./browser-harness.js";

describe.skipIf(process.env.KEEL_TEST_PG === "skip")("dashboard of several gateways", () => {
  let h: Harness | undefined;
  let other: GatewayProcess | undefined;
  let schema: Awaited<ReturnType<typeof createTestSchema>>;
  let env: Record<string, string>;

  beforeEach(async () => {
    schema = await createTestSchema();
    const url = `${TEST_PG_URL}?options=${encodeURIComponent(`-c search_path=${schema.schema}`)}`;
    // A short TTL: dead after 2 s of silence, removed after 20 s.
    env = { KEEL_DATABASE_URL: url, KEEL_LEASE_TTL: "2" };
  });
  afterEach(async () => {
    await other?.stop().catch(() => {});
    await h?.close();
    await schema.drop();
  });

  it("lists every instance, marks this one, shows a killed one as dead, then forgets it", async () => {
    h = await startHarness({ ...env, KEEL_INSTANCE_ID: "gw-dash" });
    other = await startGatewayProcess({
      env: { ...env, OPENAI_BASE_URL: h.fake.baseUrl, KEEL_INSTANCE_ID: "gw-other" },
    });
    await other.waitForReady();

    const page = await h.newPage();
    await h.login(page, "/dashboard");
    const section = page.locator("[data-testid=instances-section]");
    await expect.poll(() => section.isVisible()).toBe(true);
    const self = page.locator("tr[data-instance=gw-dash]");
    const peer = page.locator("tr[data-instance=gw-other]");
    await expect.poll(() => peer.count(), { timeout: 15_000 }).toBe(1);
    expect(await self.getAttribute("data-self")).toBe("true");
    expect(await self.locator("td").first().textContent()).toBe("gw-dash (this one)");
    expect(await self.getAttribute("data-alive")).toBe("true");
    expect(await peer.getAttribute("data-alive")).toBe("true");
    expect(await peer.locator("td").nth(2).textContent()).toBe(String(other.pid));
    await h.screenshot(page, "dashboard-instances");

    const lastHeartbeat = async () => {
      const res = await h!.fetch("/api/status", { control: true });
      const status = (await res.json()) as {
        instances: { id: string; alive: boolean; heartbeat_at: string }[];
      };
      return status.instances.find((i) => i.id === "gw-other");
    };
    other.kill("SIGKILL");
    await other.waitForExit();
    // The stream pushes the change by itself (the page is not reloaded).
    await expect.poll(() => peer.getAttribute("data-alive"), { timeout: 20_000 }).toBe("false");
    expect(await peer.locator(".state").textContent()).toBe("dead");
    const dead = await lastHeartbeat();
    expect(dead?.alive).toBe(false);
    expect(await peer.locator("td").nth(4).textContent()).toBe(
      await page.evaluate((at) => new Date(at).toLocaleString(), dead!.heartbeat_at),
    );
    expect(await self.getAttribute("data-alive")).toBe("true");
    await h.screenshot(page, "dashboard-instance-dead");

    await expect.poll(() => peer.count(), { timeout: 60_000 }).toBe(0);
    expect(await lastHeartbeat()).toBeUndefined();
    expect(await self.count()).toBe(1);
  }, 120_000);
});
