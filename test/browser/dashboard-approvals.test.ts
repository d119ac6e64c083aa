/**
 * The dashboard as an operator's desk: a pending approval with its whole command, answered from
 * here; sessions named by chat or first message with what each is doing; Keel's own lanes hidden;
 * tokens per session and in total; each platform with the age of its last event.
 */
import type { Page } from "playwright-core";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { type Harness, startHarness } from "./browser-harness.js";

let h: Harness;

beforeEach(async () => {
  h = await startHarness();
});

afterEach(async () => {
  await h?.close();
});

/** Long: a chat card shows its head and tail, the dashboard all of it (`:` does nothing). */
const STEPS = Array.from({ length: 40 }, (_, i) => `: step-${i}-${"x".repeat(40)}`);
const COMMAND = `rm -rf scratch && echo approved-from-dashboard && ${STEPS.join(" && ")}`;

async function send(page: Page, text: string): Promise<void> {
  await page.locator("#message-input").fill(text);
  await page.locator("#send-button").click();
}

const replies = (page: Page) => page.locator("[data-testid=message][data-kind=reply]");

async function sessionKeys(query = ""): Promise<string[]> {
  const res = await h.fetch(`/api/sessions${query}`, { control: true });
  const { sessions } = (await res.json()) as { sessions: { key: string }[] };
  return sessions.map((s) => s.key);
}

describe("dashboard: approvals, sessions, platforms", () => {
  it("lists a pending approval with its whole command and Approve answers it", async () => {
    const chat = await h.newPage();
    await h.login(chat);
    await send(chat, "echo: hello dashboard");
    await expect.poll(() => replies(chat).count(), { timeout: 15_000 }).toBe(1);
    await send(chat, `run: ${COMMAND}`);
    await expect
      .poll(() => chat.locator("[data-testid=approve]").count(), { timeout: 15_000 })
      .toBe(1);

    const page = await h.newPage();
    await h.login(page, "/dashboard");
    const card = page.locator("[data-testid=approval]");
    await expect.poll(() => card.count(), { timeout: 10_000 }).toBe(1);
    expect(await card.locator("[data-testid=approval-command]").textContent()).toBe(COMMAND);

    // The session is titled by its first message, not its key, and says it waits.
    const link = page.locator("[data-testid=session-link]");
    await expect
      .poll(() => link.allTextContents(), { timeout: 15_000 })
      .toEqual(["echo: hello dashboard"]);
    const state = page.locator("[data-testid=session-state]");
    await expect
      .poll(() => state.allTextContents(), { timeout: 15_000 })
      .toEqual(["awaiting approval"]);
    await h.screenshot(page, "dashboard-approval");

    await card.locator("[data-testid=approve-button]").click();
    await expect
      .poll(() => card.locator("[data-testid=approval-result]").textContent())
      .toBe("Approved.");
    // The agent went on in the chat with the command's output.
    await expect
      .poll(() => replies(chat).allTextContents(), { timeout: 15_000 })
      .toContain("ran: approved-from-dashboard");
    await expect.poll(() => card.count(), { timeout: 10_000 }).toBe(0);
    await expect.poll(() => state.allTextContents(), { timeout: 20_000 }).toEqual(["idle"]);

    // The decision was told to the chat through a notice lane, one of Keel's own
    // (`system:notices:…`): stored, but not listed.
    const internal = await sessionKeys("?internal=1");
    expect(internal.some((k) => k.startsWith("system:"))).toBe(true);
    expect((await sessionKeys()).some((k) => k.startsWith("system:"))).toBe(false);
    await page.reload();
    await expect.poll(() => link.count()).toBe(1);
    const keys = await page
      .locator("#sessions-body tr")
      .evaluateAll((trs) => trs.map((tr) => tr.getAttribute("data-session-key")));
    expect(keys).toEqual([internal.find((k) => !k.startsWith("system:"))]);
  });

  it("shows tokens per session and in total, and each platform's last event", async () => {
    const chat = await h.newPage();
    await h.login(chat);
    await send(chat, "echo: count my tokens");
    await expect.poll(() => replies(chat).count(), { timeout: 15_000 }).toBe(1);

    const page = await h.newPage();
    await h.login(page, "/dashboard");
    const rows = page.locator("#sessions-body tr");
    await expect.poll(() => page.locator("[data-testid=session-link]").count()).toBe(1);
    expect(await page.locator("[data-testid=session-link]").textContent()).toBe(
      "echo: count my tokens",
    );
    // The fake model reports usage: tokens per session and in total.
    const cells = await rows.first().locator("td").allTextContents();
    expect(cells[6]).toMatch(/^[1-9][\d,]* \/ [1-9][\d,]*$/);
    await expect.poll(() => page.locator("#total-usage").textContent()).toMatch(/^[1-9]/);
    const webchat = page.locator("#platforms-body tr[data-platform=webchat]");
    await expect
      .poll(() => webchat.locator("[data-testid=platform-last-event]").textContent())
      .toMatch(/ago$/);
    // The connection's health (`/api/status`'s platform state).
    expect(await webchat.locator("[data-testid=platform-state]").textContent()).toBe("connected");
    await h.screenshot(page, "dashboard-sessions");
  });
});
