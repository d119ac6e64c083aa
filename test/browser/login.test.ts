/**
 * The browser login as a person meets it: no session → a page saying to open the login link; the
 * link sets an HttpOnly SameSite=Strict cookie and lands on `/` without the token; `keel open`'s
 * redirect file works too; and a page of another origin on the same machine cannot use the session.
 */
import { writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import type { Page } from "playwright-core";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { type Harness, startHarness } from "./browser-harness.js";

let h: Harness;
let evil: Server | undefined;

beforeEach(async () => {
  h = await startHarness();
});

afterEach(async () => {
  await new Promise<void>((resolve) => (evil ? evil.close(() => resolve()) : resolve()));
  evil = undefined;
  await h?.close();
});

async function chatWorks(page: Page): Promise<void> {
  await page.locator("#message-input").fill("echo: logged in");
  await page.locator("#send-button").click();
  const reply = page.locator("[data-testid=message][data-kind=reply]");
  await expect.poll(() => reply.allTextContents(), { timeout: 15_000 }).toEqual(["logged in"]);
}

describe("browser login", () => {
  it("shows the login hint without a session; the link sets an HttpOnly cookie and lands on / without the token", async () => {
    const page = await h.newPage();
    const refused = await page.goto(`${h.baseUrl}/`);
    expect(refused?.status()).toBe(401);
    expect(await page.locator("[data-testid=login-required]").textContent()).toContain("keel open");
    await h.screenshot(page, "login-required");

    await page.goto(h.loginLink());
    expect(page.url()).toBe(`${h.baseUrl}/`);
    const cookies = await page.context().cookies(h.baseUrl);
    const session = cookies.find((c) => c.name === "keel_session");
    expect(session).toMatchObject({ httpOnly: true, sameSite: "Strict", path: "/" });
    expect(session?.value).not.toContain(h.controlToken());
    // No script of the page can read it.
    expect(await page.evaluate<string>("document.cookie")).not.toContain("keel_session");
    await chatWorks(page);
    expect(await page.locator("#offline-banner").isHidden()).toBe(true);
  });

  it("logs in through a redirect file like the one `keel open` hands the browser", async () => {
    const file = join(h.home, "login.html");
    writeFileSync(
      file,
      `<!doctype html><meta http-equiv="refresh" content="0;url=${h.loginLink()}">`,
      { mode: 0o600 },
    );
    const page = await h.newPage();
    await page.goto(pathToFileURL(file).href);
    await page.waitForURL(`${h.baseUrl}/`, { timeout: 15_000 });
    await chatWorks(page);
  });

  it("a page of another origin on this machine cannot use the session: no WebSocket, no completion", async () => {
    const port = h.port;
    evil = createServer((_req, res) => {
      res.writeHead(200, { "content-type": "text/html" });
      res.end(`<!doctype html><script>
        window.results = {};
        const ws = new WebSocket("ws://127.0.0.1:${port}/ws", ["keel.v1"]);
        ws.onopen = () => { window.results.ws = "open"; };
        ws.onerror = () => { window.results.ws = "refused"; };
        fetch("http://127.0.0.1:${port}/v1/chat/completions", {
          method: "POST", credentials: "include", mode: "no-cors",
          headers: { "content-type": "text/plain" },
          body: JSON.stringify({ messages: [{ role: "user", content: "run: id" }] }),
        }).then(() => { window.results.post = "sent"; }, () => { window.results.post = "failed"; });
        fetch("http://127.0.0.1:${port}/api/sessions", { credentials: "include" })
          .then((r) => r.text()).then((t) => { window.results.read = t; }, () => { window.results.read = "blocked"; });
      </script>`);
    });
    await new Promise<void>((resolve) => evil!.listen(0, "127.0.0.1", resolve));
    const evilPort = (evil.address() as AddressInfo).port;

    const page = await h.newPage();
    await h.login(page);
    await page.goto(`http://127.0.0.1:${evilPort}/`);
    await expect
      .poll(() => page.evaluate<number>("Object.keys(window.results).length"), { timeout: 15_000 })
      .toBe(3);
    const results = await page.evaluate<Record<string, string>>("window.results");
    expect(results.ws).toBe("refused");
    expect(results.read).toBe("blocked");
    expect(h.fake.requests).toHaveLength(0);
  });
});
