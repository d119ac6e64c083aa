import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { type Harness, startHarness } from "./browser-harness.js";

let h: Harness;

beforeEach(async () => {
  h = await startHarness();
});

afterEach(async () => {
  await h?.close();
});

async function readyz(): Promise<number> {
  const res = await h.fetch("/readyz");
  await res.body?.cancel();
  return res.status;
}

describe("dashboard in a browser", () => {
  it("without a session says to open the login link; logged in, drains and cancels the drain, and shows a transcript", async () => {
    const chat = await h.newPage();
    await h.login(chat);
    await chat.locator("#message-input").fill("echo: for the dashboard");
    await chat.locator("#send-button").click();
    await expect.poll(() => chat.locator("[data-kind=reply]").count(), { timeout: 15_000 }).toBe(1);

    const page = await h.newPage();
    const refused = await page.goto(`${h.baseUrl}/dashboard`);
    expect(refused?.status()).toBe(401);
    expect(await page.locator("[data-testid=login-required]").textContent()).toContain("keel open");
    await h.screenshot(page, "dashboard-login-required");
    await h.login(page, "/dashboard");

    const state = page.locator("#gateway-state");
    await expect.poll(() => state.textContent()).toBe("running");
    expect(await page.locator("#login-needed").isHidden()).toBe(true);
    await expect.poll(() => page.locator("#version").textContent()).toMatch(/\d+\.\d+\.\d+/);
    await expect.poll(() => page.locator("#uptime").textContent()).toMatch(/\d+s/);
    expect(await page.locator("#active-turns").textContent()).toBe("0");
    await expect.poll(() => page.locator("#session-count").textContent()).toMatch(/^1 /);
    await expect.poll(() => page.locator("[data-testid=session-link]").count()).toBe(1);
    expect(await page.locator("#cancel-drain-button").isDisabled()).toBe(true);
    await h.screenshot(page, "dashboard");

    await page.locator("#drain-button").click();
    await expect.poll(() => state.textContent(), { timeout: 10_000 }).toBe("draining");
    await expect.poll(readyz, { timeout: 10_000 }).toBe(503);
    expect(await page.locator("#drain-button").isDisabled()).toBe(true);
    await h.screenshot(page, "dashboard-draining");

    await page.locator("#cancel-drain-button").click();
    await expect.poll(() => state.textContent(), { timeout: 10_000 }).toBe("running");
    await expect.poll(readyz, { timeout: 10_000 }).toBe(200);

    await page.locator("[data-testid=session-link]").click();
    const transcript = page.locator("#transcript-view");
    await expect.poll(() => transcript.isVisible()).toBe(true);
    await expect
      .poll(() => transcript.locator("[data-testid=transcript-message]").allTextContents())
      .toEqual([
        expect.stringContaining("echo: for the dashboard"),
        expect.stringContaining("for the dashboard"),
      ]);
    await h.screenshot(page, "dashboard-transcript");
  });
});
