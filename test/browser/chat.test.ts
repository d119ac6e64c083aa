import type { Page } from "playwright-core";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { waitFor } from "../helpers/wait-for.js";
import { type Harness, startHarness } from "./browser-harness.js";

let h: Harness;

beforeEach(async () => {
  h = await startHarness();
});

afterEach(async () => {
  await h?.close();
});

const replies = (page: Page) => page.locator("[data-testid=message][data-kind=reply]");

async function send(page: Page, text: string): Promise<void> {
  await page.locator("#message-input").fill(text);
  await page.locator("#send-button").click();
}

describe("web chat in a browser", () => {
  it("streams a reply as it is produced, shows it once, and shows the history after a reload", async () => {
    const answer = "The quick brown fox jumps over the lazy dog, twice over.";
    h.fake.script({ text: answer, chunkDelayMs: 120 });
    const page = await h.newPage();
    await h.login(page);
    await send(page, "Tell me about the fox");

    const user = page.locator("[data-testid=message][data-kind=user]");
    await expect.poll(() => user.getAttribute("data-seq")).toMatch(/^\d+$/);
    const seen = new Set<string>();
    await waitFor(
      async () => {
        const live = await page.locator("[data-testid=live-reply]").allTextContents();
        for (const text of live) if (text) seen.add(text);
        return (await replies(page).count()) > 0;
      },
      { timeoutMs: 15_000, intervalMs: 30, message: "the durable reply" },
    );
    const partial = [...seen].filter((t) => t.length < answer.length);
    expect(partial.length).toBeGreaterThanOrEqual(2);
    for (const text of partial) expect(answer.startsWith(text)).toBe(true);

    await expect.poll(() => replies(page).allTextContents()).toEqual([answer]);
    await expect.poll(() => page.locator("[data-testid=live-reply]").count()).toBe(0);
    expect(await user.allTextContents()).toEqual(["Tell me about the fox"]);
    expect(await page.locator("#offline-banner").isHidden()).toBe(true);
    await h.screenshot(page, "chat-desktop");

    await page.reload();
    await expect.poll(() => replies(page).allTextContents()).toEqual([answer]);
    expect(await user.allTextContents()).toEqual(["Tell me about the fox"]);
    const items = page.locator("[data-testid=conversation-item]");
    await expect.poll(() => items.count()).toBe(1);
    expect(await items.first().textContent()).toContain("Tell me about the fox");
    const messages = page.locator("#messages [data-testid=message]");
    const seqs: number[] = [];
    for (const node of await messages.all()) seqs.push(Number(await node.getAttribute("data-seq")));
    expect(seqs.every((n) => n > 0)).toBe(true);
    expect(seqs).toEqual([...seqs].sort((a, b) => a - b));
  });

  it("shows HTML in model output and user messages as text", async () => {
    const hostile = "<script>alert(1)</script> and <img src=x onerror=alert(2)> **bold**";
    h.fake.script({ text: hostile });
    const page = await h.newPage();
    const dialogs: string[] = [];
    page.on("dialog", (dialog) => {
      dialogs.push(dialog.message());
      void dialog.dismiss();
    });
    await h.login(page);
    await send(page, hostile);

    const reply = replies(page);
    await expect.poll(() => reply.count(), { timeout: 15_000 }).toBe(1);
    expect(await reply.isVisible()).toBe(true);
    expect(await reply.textContent()).toContain(
      "<script>alert(1)</script> and <img src=x onerror=alert(2)>",
    );
    expect(await reply.locator("strong").textContent()).toBe("bold");
    const user = page.locator("[data-testid=message][data-kind=user]");
    expect(await user.textContent()).toContain("<img src=x onerror=alert(2)>");
    expect(await page.locator("#messages img, #messages script").count()).toBe(0);
    expect(dialogs).toEqual([]);
  });

  it("shows a tool call compactly: the command, and its output folded away", async () => {
    const page = await h.newPage();
    await h.login(page);
    await send(page, "run: echo tool-marker-42; seq 1 30");

    await expect
      .poll(() => replies(page).allTextContents(), { timeout: 15_000 })
      .toEqual(["ran: tool-marker-42"]);
    const call = page.locator("[data-testid=tool-call]");
    expect(await call.count()).toBe(1);
    const summary = call.locator("summary");
    expect(await summary.textContent()).toContain("terminal echo tool-marker-42; seq 1 30");
    expect(await call.getAttribute("data-state")).toBe("done");
    const output = call.locator("[data-testid=tool-output]");
    expect(await output.isVisible()).toBe(false);
    await summary.click();
    await expect.poll(() => output.isVisible()).toBe(true);
    expect(await output.textContent()).toContain("tool-marker-42\n1\n2\n3");
    await h.screenshot(page, "chat-tool-call");

    // After a reload the call is still there, once, before the reply, from the stored history.
    await page.reload();
    await expect
      .poll(() => replies(page).allTextContents(), { timeout: 15_000 })
      .toEqual(["ran: tool-marker-42"]);
    expect(await call.count()).toBe(1);
    expect(await summary.textContent()).toContain("terminal echo tool-marker-42; seq 1 30");
    expect(await call.getAttribute("data-state")).toBe("done");
    const order = await page
      .locator("#messages > [data-testid=tool-call], #messages [data-kind=reply]")
      .evaluateAll((nodes) => nodes.map((n) => n.getAttribute("data-testid")));
    expect(order).toEqual(["tool-call", "message"]);
    await summary.click();
    await expect.poll(() => output.textContent()).toContain("tool-marker-42\n1\n2\n3");
  });

  it("keeps the message box and send button usable at phone width", async () => {
    const page = await h.newPage({ width: 390, height: 844 });
    // Phones often run dark: the screenshot then shows the dark palette too.
    await page.emulateMedia({ colorScheme: "dark" });
    await h.login(page);
    for (const id of ["#message-input", "#send-button"]) {
      const box = await page.locator(id).boundingBox();
      expect(box, id).not.toBeNull();
      expect(box!.x).toBeGreaterThanOrEqual(0);
      expect(box!.x + box!.width).toBeLessThanOrEqual(390);
      expect(box!.y + box!.height).toBeLessThanOrEqual(844);
    }
    expect(await page.evaluate<number>("document.documentElement.scrollWidth")).toBeLessThanOrEqual(
      390,
    );

    await page.locator("#message-input").fill("echo: typed on a phone");
    await page.locator("#message-input").press("Enter");
    await expect
      .poll(() => replies(page).allTextContents(), { timeout: 15_000 })
      .toEqual(["typed on a phone"]);
    await page.locator("#message-input").fill("echo: tapped send");
    await page.locator("#send-button").click();
    await expect.poll(() => replies(page).count(), { timeout: 15_000 }).toBe(2);
    const input = await page.locator("#message-input").boundingBox();
    expect(input!.y + input!.height).toBeLessThanOrEqual(844);
    await h.screenshot(page, "chat-phone-dark");

    const item = page.locator("[data-testid=conversation-item]");
    expect(await item.isVisible()).toBe(false);
    await page.locator("#toggle-sidebar").click();
    await expect.poll(() => item.isVisible()).toBe(true);
    await h.screenshot(page, "chat-phone-sidebar");
    await item.click();
    await expect
      .poll(() => page.locator("#toggle-sidebar").getAttribute("aria-expanded"))
      .toBe("false");
    expect(await replies(page).count()).toBe(2);
  });
});

describe("approvals in the web chat", () => {
  it("a dangerous command shows buttons; Approve once runs it and the agent goes on", async () => {
    const page = await h.newPage();
    await h.login(page);
    await send(page, "run: rm -rf scratch && echo approved-and-ran");
    const approve = page.locator("[data-testid=approve]");
    await expect.poll(() => approve.count(), { timeout: 15_000 }).toBe(1);
    const card = page.locator("[data-testid=message]", { has: approve });
    expect(await card.textContent()).toContain("rm -rf scratch");
    expect(await page.locator("[data-testid=deny]").count()).toBe(1);
    expect(await page.locator("[data-testid=approve-session]").count()).toBe(1);
    await h.screenshot(page, "chat-approval");

    await approve.click();
    await expect
      .poll(() => replies(page).allTextContents(), { timeout: 15_000 })
      .toContain("ran: approved-and-ran");
    // Answered: the card says so instead of offering its buttons again.
    const answered = page.locator("[data-testid=approval]");
    await expect.poll(() => answered.getAttribute("data-state")).toBe("answered");
    expect(await approve.count()).toBe(0);
  });
});
