import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { FakeStep } from "../fakes/openai-server.js";
import { waitFor } from "../helpers/wait-for.js";
import { type Harness, startHarness } from "./browser-harness.js";

let h: Harness;

beforeEach(async () => {
  h = await startHarness();
});

afterEach(async () => {
  await h?.close();
});

const ANSWER = "Resumed answer after the restart.";

describe("web chat across a gateway restart", () => {
  it("goes offline, reconnects by itself, and shows the resumed reply once", async () => {
    // The first model call streams slowly (the restart cuts it off); the resumed turn's answers.
    h.fake.script(
      (): FakeStep =>
        h.fake.requests.length === 1
          ? { text: "Partial words that the restart cuts off", chunkDelayMs: 1000 }
          : { text: ANSWER, chunkDelayMs: 30 },
    );
    const chat = await h.newPage();
    await h.login(chat);
    await chat.locator("#message-input").fill("Please work on this");
    await chat.locator("#send-button").click();
    const liveReply = chat.locator("[data-testid=live-reply]");
    await expect.poll(() => liveReply.textContent(), { timeout: 10_000 }).toMatch(/^Parti/);

    const dashboard = await h.newPage();
    await h.login(dashboard, "/dashboard");
    await expect.poll(() => dashboard.locator("#active-turns").textContent()).toBe("1");
    const dialogs: string[] = [];
    dashboard.on("dialog", (dialog) => {
      dialogs.push(dialog.type());
      void dialog.accept();
    });
    h.restartRequested = true;
    await dashboard.locator("#restart-button").click();
    expect(dialogs).toEqual(["confirm"]);

    const banner = chat.locator("#offline-banner");
    await expect.poll(() => banner.isVisible(), { timeout: 10_000 }).toBe(true);
    await h.screenshot(chat, "chat-offline");
    const successor = await h.followRestart();
    await successor.waitForReady();
    await expect.poll(() => banner.isHidden(), { timeout: 20_000 }).toBe(true);

    const replies = chat.locator("[data-testid=message][data-kind=reply]");
    await expect.poll(() => replies.allTextContents(), { timeout: 20_000 }).toEqual([ANSWER]);
    await waitFor(
      async () => {
        const res = await h.fetch("/api/status", { control: true });
        return ((await res.json()) as { active_turns: number }).active_turns === 0;
      },
      { timeoutMs: 10_000, message: "no turn running" },
    );
    expect(await replies.count()).toBe(1);
    // The cut-off text is gone (the page was offline when the turn ended) or marked as such.
    expect(await liveReply.count()).toBe(0);
    for (const text of await chat.locator("[data-testid=live-intermediate]").allTextContents()) {
      expect(text).toContain("Interrupted");
    }
    expect(await chat.locator("[data-testid=message][data-kind=user]").allTextContents()).toEqual([
      "Please work on this",
    ]);
    const notices = await chat.locator("[data-testid=message][data-kind=notice]").allTextContents();
    expect(notices).toEqual([expect.stringContaining("restarting")]);
    await h.screenshot(chat, "chat-after-restart");

    await expect
      .poll(() => dashboard.locator("#pid").textContent(), { timeout: 20_000 })
      .toBe(String(successor.pid));
    await expect
      .poll(() => dashboard.locator("#gateway-state").textContent(), { timeout: 10_000 })
      .toBe("running");

    await chat.reload();
    await expect.poll(() => replies.allTextContents()).toEqual([ANSWER]);
    expect(h.fake.requests).toHaveLength(2);
  });
});
