import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { defaultScript, imagePartsOf, lastUserText } from "../fakes/openai-server.js";
import { type Harness, startHarness } from "./browser-harness.js";

const PNG = Buffer.from(
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==",
  "base64",
);

let h: Harness;

beforeEach(async () => {
  h = await startHarness();
});

afterEach(async () => {
  await h?.close();
});

describe("web chat files in a browser", () => {
  it("attaches an image with the button; the model sees it and the bubble names it", async () => {
    const page = await h.newPage();
    await h.login(page);
    await page.locator("#file-input").setInputFiles({
      name: "shot.png",
      mimeType: "image/png",
      buffer: PNG,
    });
    await expect
      .poll(() => page.locator("[data-testid=pending-attachment]").allTextContents())
      .toEqual([expect.stringContaining("shot.png")]);
    await page.locator("#message-input").fill("what is this?");
    await page.locator("#send-button").click();

    const reply = page.locator("[data-testid=message][data-kind=reply]");
    await expect.poll(() => reply.count(), { timeout: 15_000 }).toBe(1);
    const request = h.fake.requests.at(-1)!;
    expect(imagePartsOf(request)).toEqual([`data:image/png;base64,${PNG.toString("base64")}`]);
    expect(lastUserText(request)).toContain("what is this?");
    const chip = page.locator(
      "[data-testid=message][data-kind=user] [data-testid=message-attachment]",
    );
    expect(await chip.textContent()).toContain("shot.png");
    expect(await page.locator("[data-testid=pending-attachment]").count()).toBe(0);
  });

  it("shows an image the agent sends inline, loaded from /files with the session cookie", async () => {
    mkdirSync(join(h.home, "workspace"), { recursive: true });
    writeFileSync(join(h.home, "workspace", "chart.png"), PNG);
    h.fake.script((request) =>
      request.messages.at(-1)?.role === "tool"
        ? { text: "Here is the chart." }
        : lastUserText(request) === "chart please"
          ? { toolCalls: [{ name: "send_file", arguments: { path: "chart.png" } }] }
          : defaultScript(request),
    );
    const page = await h.newPage();
    await h.login(page);
    await page.locator("#message-input").fill("chart please");
    await page.locator("#send-button").click();

    const image = page.locator("[data-testid=file] img");
    await expect.poll(() => image.count(), { timeout: 15_000 }).toBe(1);
    expect(await image.getAttribute("src")).toMatch(/^\/files\/[0-9a-f-]{36}$/);
    await expect
      .poll(() =>
        image.evaluate((img) => (img as unknown as { naturalWidth: number }).naturalWidth),
      )
      .toBe(1);
    const reply = page.locator("[data-testid=message][data-kind=reply]");
    await expect.poll(() => reply.allTextContents()).toContain("Here is the chart.");
  });
});
