/**
 * The web chat reads question, answer, question, answer while it happens, on every path a
 * message and its answer take: the send button, Enter, a streamed reply, tool calls, an
 * approval card, a second tab, a dropped connection and a reload.
 */
import type { Page, WebSocketRoute } from "playwright-core";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { type Harness, startHarness } from "./browser-harness.js";

let h: Harness;

beforeEach(async () => {
  h = await startHarness();
});

afterEach(async () => {
  await h?.close();
});

/** The parts of a DOM element the transcript reads (the test's types have no DOM). */
interface ShownNode {
  dataset: Record<string, string | undefined>;
  firstChild: { textContent: string | null } | null;
  querySelector(selector: string): { textContent: string | null } | null;
}

/**
 * What the conversation shows, top to bottom: `user:`, `reply:` or `notice:` with the text (up
 * to its first line break), `tool:` with the command, `live:` for streamed text, `card:` for an
 * approval card.
 */
function transcript(page: Page): Promise<string[]> {
  return page
    .locator(
      "#messages [data-testid=message], #messages [data-testid=tool-call], #messages [data-testid=live-reply]",
    )
    .evaluateAll((nodes) =>
      nodes.map((n) => {
        const el = n as unknown as ShownNode;
        if (el.dataset.testid === "tool-call")
          return `tool:${el.querySelector("code")?.textContent}`;
        if (el.dataset.testid === "live-reply") return "live";
        if (el.querySelector("[data-testid=approval]")) return "card";
        const text = (el.firstChild?.textContent ?? "").split("\n")[0];
        return `${el.dataset.kind}:${text}`;
      }),
    );
}

const replies = (page: Page) => page.locator("[data-testid=message][data-kind=reply]");

async function type(page: Page, text: string, how: "click" | "enter"): Promise<void> {
  await page.locator("#message-input").fill(text);
  if (how === "click") await page.locator("#send-button").click();
  else await page.locator("#message-input").press("Enter");
}

describe("web chat order", () => {
  it("send button and Enter: each answer, with its tool call, comes after its question", async () => {
    const page = await h.newPage();
    await h.login(page);
    await type(page, "run: echo first-out", "click");
    await expect.poll(() => replies(page).count(), { timeout: 15_000 }).toBe(1);
    const one = [
      "user:run: echo first-out",
      "tool:terminal echo first-out",
      "reply:ran: first-out",
    ];
    expect(await transcript(page)).toEqual(one);

    await type(page, "echo: second answer", "enter");
    await expect.poll(() => replies(page).count(), { timeout: 15_000 }).toBe(2);
    const two = [...one, "user:echo: second answer", "reply:second answer"];
    expect(await transcript(page)).toEqual(two);

    await page.reload();
    await expect.poll(() => transcript(page), { timeout: 15_000 }).toEqual(two);
  });

  it("draws its icons as inline SVG, not as emoji or symbol characters", async () => {
    const page = await h.newPage();
    await h.login(page);
    for (const id of ["#attach-button", "#toggle-sidebar"]) {
      expect(await page.locator(`${id} svg`).count(), id).toBe(1);
      expect((await page.locator(id).textContent())?.trim(), id).toBe("");
    }
  });

  it("a streamed reply grows below its question, and another tab shows the same order", async () => {
    const answer = "Streaming words arrive one after another, slowly enough to be seen.";
    h.fake.script({ text: answer, chunkDelayMs: 150 });
    const page = await h.newPage();
    await h.login(page);
    const other = await page.context().newPage();
    await other.goto(`${h.baseUrl}/`);
    await type(page, "tell me slowly", "click");
    // The second tab opened no conversation yet: show it the one the first tab writes in.
    await other.reload();
    await expect
      .poll(() => transcript(page), { timeout: 15_000 })
      .toEqual(["user:tell me slowly", "live"]);
    await expect.poll(() => replies(page).count(), { timeout: 15_000 }).toBe(1);
    expect(await transcript(page)).toEqual(["user:tell me slowly", `reply:${answer}`]);
    await expect.poll(() => transcript(other)).toEqual(["user:tell me slowly", `reply:${answer}`]);

    // A message sent from the other tab (no bubble of its own on this one) keeps the order here.
    h.fake.script({ text: "second", chunkDelayMs: 50 });
    await type(other, "and again", "enter");
    const both = ["user:tell me slowly", `reply:${answer}`, "user:and again", "reply:second"];
    await expect.poll(() => transcript(page), { timeout: 15_000 }).toEqual(both);
    await expect.poll(() => transcript(other), { timeout: 15_000 }).toEqual(both);
  });

  it("a connection dropped mid-reply comes back in order", async () => {
    const answer = "Text that keeps streaming while the page is cut off and back.";
    h.fake.script({ text: answer, chunkDelayMs: 200 });
    const page = await h.newPage();
    const sockets: WebSocketRoute[] = [];
    await page.routeWebSocket(/\/ws$/, (ws) => {
      sockets.push(ws);
      ws.connectToServer();
    });
    await h.login(page);
    await type(page, "keep talking", "click");
    await expect
      .poll(() => transcript(page), { timeout: 15_000 })
      .toEqual(["user:keep talking", "live"]);
    const banner = page.locator("#offline-banner");
    await sockets.at(-1)!.close();
    await expect.poll(() => banner.isVisible()).toBe(true);
    await expect.poll(() => banner.isHidden(), { timeout: 15_000 }).toBe(true);
    await expect.poll(() => replies(page).count(), { timeout: 15_000 }).toBe(1);
    expect(sockets.length).toBeGreaterThan(1);
    expect(await transcript(page)).toEqual(["user:keep talking", `reply:${answer}`]);
  });

  it("an approval card comes after its question, its answer after it, and stays answered after a reload", async () => {
    const page = await h.newPage();
    await h.login(page);
    await type(page, "run: rm -rf scratch && echo approved-and-ran", "click");
    const approve = page.locator("[data-testid=approve]");
    await expect.poll(() => approve.count(), { timeout: 15_000 }).toBe(1);
    expect(await transcript(page)).toEqual([
      "user:run: rm -rf scratch && echo approved-and-ran",
      "card",
    ]);
    await approve.click();
    await expect
      .poll(() => replies(page).allTextContents(), { timeout: 15_000 })
      .toContain("ran: approved-and-ran");
    const shown = await transcript(page);
    expect(shown.slice(0, 3)).toEqual([
      "user:run: rm -rf scratch && echo approved-and-ran",
      "card",
      expect.stringMatching(/^user:\/approve /),
    ]);
    // The continued turn (its tool call and reply) follows the answer. Where the command's own
    // confirmation lands among them is the server's order, the same after the reload below.
    const continued = shown.filter((line) => !line.startsWith("notice:"));
    expect(continued.slice(3)).toEqual([
      "tool:terminal rm -rf scratch && echo approved-and-ran",
      "reply:ran: approved-and-ran",
    ]);
    const card = page.locator("[data-testid=approval]");
    await expect.poll(() => card.getAttribute("data-state")).toBe("answered");
    expect(await card.locator("button").count()).toBe(0);

    await page.reload();
    await expect.poll(() => transcript(page), { timeout: 15_000 }).toEqual(shown);
    await expect.poll(() => card.getAttribute("data-state")).toBe("answered");
    expect(await card.locator("button").count()).toBe(0);
    expect(await card.textContent()).toMatch(/approved/i);
  });

  it("a card answered from outside the chat (the control API) shows as answered", async () => {
    const page = await h.newPage();
    await h.login(page);
    await type(page, "run: rm -rf scratch && echo from-outside", "click");
    const card = page.locator("[data-testid=approval]");
    await expect.poll(() => card.count(), { timeout: 15_000 }).toBe(1);
    const res = await h.fetch("/api/approvals", { control: true });
    const { approvals } = (await res.json()) as { approvals: Array<{ id: string }> };
    const id = approvals[0]!.id;
    const decided = await h.fetch(`/api/approvals/${id}`, {
      method: "POST",
      control: true,
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ decision: "deny" }),
    });
    expect(decided.status).toBe(200);
    await expect.poll(() => card.getAttribute("data-state"), { timeout: 15_000 }).toBe("answered");
    expect(await card.locator("button").count()).toBe(0);
    await page.reload();
    await expect.poll(() => card.getAttribute("data-state"), { timeout: 15_000 }).toBe("answered");
    expect(await card.locator("button").count()).toBe(0);
  });
});
