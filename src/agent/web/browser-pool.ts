/**
 * Headless Chromium for the `browser` tool: the system's Chromium driven by playwright-core,
 * both loaded on the first browser call. One browser process, one isolated context (cookies,
 * storage, one page) per session, closed after five idle minutes; the process itself closes with
 * its last context. Every request of every context goes through the guard proxy.
 */
import type { Browser, BrowserContext, Page } from "playwright-core";
import type { AddressRules, Resolve } from "./address-rules.js";
import { type GuardProxy, startGuardProxy } from "./guard-proxy.js";

export const BROWSER_IDLE_MS = 5 * 60_000;

export interface BrowserPoolOptions {
  executablePath: string;
  rules: AddressRules;
  idleMs?: number;
  resolve?: Resolve;
}

export interface BrowserSession {
  page: Page;
  /** Files downloaded since the last call took them, as paths relative to the working folder. */
  downloads: string[];
}

interface Entry {
  context: BrowserContext;
  session: BrowserSession;
  timer: NodeJS.Timeout;
  /** Actions running on the page: the idle clock counts only from the end of the last one. */
  busy: number;
}

interface Running {
  browser: Browser;
  proxy: GuardProxy;
}

export class BrowserPool {
  private running: Promise<Running> | null = null;
  private readonly sessions = new Map<string, Promise<Entry>>();

  constructor(private readonly options: BrowserPoolOptions) {}

  /**
   * Runs `action` on the session's page, opened on first use (`onOpen` sees it first). The page
   * is not closed for idleness while an action runs; its idle clock restarts when one ends.
   */
  async use<T>(
    key: string,
    onOpen: (session: BrowserSession) => void,
    action: (session: BrowserSession) => Promise<T>,
  ): Promise<T> {
    let entry = this.sessions.get(key);
    if (!entry) {
      entry = this.open(key, onOpen);
      this.sessions.set(key, entry);
      entry.catch(() => this.sessions.delete(key));
    }
    const ready = await entry;
    ready.busy++;
    try {
      return await action(ready.session);
    } finally {
      ready.busy--;
      ready.timer.refresh();
    }
  }

  has(key: string): boolean {
    return this.sessions.has(key);
  }

  /** What the proxy refused since the last call. */
  async takeRefusals(): Promise<string[]> {
    if (!this.running) return [];
    return (await this.running.catch(() => null))?.proxy.takeRefusals() ?? [];
  }

  async close(key: string): Promise<boolean> {
    const entry = this.sessions.get(key);
    if (!entry) return false;
    this.sessions.delete(key);
    const ready = await entry.catch(() => null);
    if (ready) {
      clearTimeout(ready.timer);
      await ready.context.close().catch(() => undefined);
    }
    if (this.sessions.size === 0) await this.stopBrowser();
    return true;
  }

  /** Closes every context and the browser (the gateway stops). */
  async closeAll(): Promise<void> {
    await Promise.all([...this.sessions.keys()].map((key) => this.close(key)));
    await this.stopBrowser();
  }

  private async open(key: string, onOpen: (session: BrowserSession) => void): Promise<Entry> {
    const { browser } = await this.start();
    const context = await browser.newContext({
      acceptDownloads: true,
      viewport: { width: 1280, height: 800 },
      // Service workers would fetch outside the page's own requests; nothing here needs them.
      serviceWorkers: "block",
    });
    const page = await context.newPage();
    const session: BrowserSession = { page, downloads: [] };
    onOpen(session);
    // Closing clears this timer, so it never reaches a later session under the same key.
    const entry: Entry = {
      context,
      session,
      busy: 0,
      timer: setTimeout(() => {
        if (entry.busy === 0) void this.close(key);
        else entry.timer.refresh();
      }, this.options.idleMs ?? BROWSER_IDLE_MS),
    };
    entry.timer.unref();
    return entry;
  }

  private start(): Promise<Running> {
    this.running ??= (async () => {
      const proxy = await startGuardProxy(this.options.rules, this.options.resolve);
      try {
        const { chromium } = await import("playwright-core");
        const browser = await chromium.launch({
          executablePath: this.options.executablePath,
          headless: true,
          // Playwright also sends loopback through the proxy (it adds `<-loopback>`).
          proxy: { server: proxy.url, username: proxy.username, password: proxy.password },
          args: [
            // Chromium refuses to start its sandbox as root (containers): only then without it.
            ...(process.getuid?.() === 0 ? ["--no-sandbox"] : []),
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            // WebRTC could otherwise reach the local network over UDP, around the proxy.
            "--force-webrtc-ip-handling-policy=disable_non_proxied_udp",
          ],
        });
        return { browser, proxy };
      } catch (error) {
        await proxy.close();
        throw error;
      }
    })();
    this.running.catch(() => {
      this.running = null;
    });
    return this.running;
  }

  private async stopBrowser(): Promise<void> {
    const running = this.running;
    this.running = null;
    const ready = await running?.catch(() => null);
    if (!ready) return;
    await ready.browser.close().catch(() => undefined);
    await ready.proxy.close();
  }
}
