/**
 * The dashboard's budgets: each budget per key with what is spent and left, and a turn a budget
 * paused, answered from here (Raise lets the waiting turn go on in the chat).
 */
import type { Page } from "playwright-core";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { type Harness, startHarness } from "./browser-harness.js";

let h: Harness;

beforeEach(async () => {
  h = await startHarness({}, "budgets:\n  - { scope: chat, period: day, tokens: 1 }\n");
});

afterEach(async () => {
  await h?.close();
});

async function send(page: Page, text: string): Promise<void> {
  await page.locator("#message-input").fill(text);
  await page.locator("#send-button").click();
}

const replies = (page: Page) => page.locator("[data-testid=message][data-kind=reply]");

describe("dashboard: budgets", () => {
  it("shows the used-up chat budget and its pause; Raise lets the turn go on", async () => {
    const chat = await h.newPage();
    await h.login(chat);
    await send(chat, "echo: one");
    await expect.poll(() => replies(chat).allTextContents(), { timeout: 15_000 }).toContain("one");
    await send(chat, "echo: two");

    const page = await h.newPage();
    await h.login(page, "/dashboard");
    const pause = page.locator("[data-testid=budget-pause]");
    await expect.poll(() => pause.count(), { timeout: 15_000 }).toBe(1);
    expect(await pause.textContent()).toContain("Paused: the chat budget per day");
    const rows = page.locator("[data-testid=budget-row]");
    await expect.poll(() => rows.count(), { timeout: 10_000 }).toBe(1);
    expect(await rows.first().textContent()).toContain("used up");
    await h.screenshot(page, "dashboard-budgets");

    await pause.locator("[data-testid=budget-raise]").click();
    await expect.poll(() => replies(chat).allTextContents(), { timeout: 15_000 }).toContain("two");
    await expect.poll(() => pause.count(), { timeout: 10_000 }).toBe(0);
    await expect.poll(() => rows.first().textContent(), { timeout: 10_000 }).toContain("raised 1×");
  });
});
