/**
 * What every browser test needs: a fake model, a real gateway process (the built CLI) in a
 * temporary home, and headless Chromium (Debian's `/usr/bin/chromium` driven by
 * playwright-core). `close()` stops all of them; call it in `afterEach`.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { type Browser, type BrowserContext, chromium, type Page } from "playwright-core";
import { type FakeOpenAI, startFakeOpenAI } from "../fakes/openai-server.js";
import {
  adoptSuccessor,
  followRestart,
  freePort,
  type GatewayProcess,
  REPO_ROOT,
  startGatewayProcess,
} from "../helpers/gateway-process.js";
import { createTempDir } from "../helpers/temp-home.js";

/** Where screenshots go (gitignored). */
export const ARTIFACTS = join(REPO_ROOT, "test-artifacts", "browser");

const CHROMIUM = "/usr/bin/chromium";
const CHROMIUM_ARGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
  "--no-first-run",
];

export interface Harness {
  readonly fake: FakeOpenAI;
  readonly home: string;
  readonly port: number;
  /** The gateway currently serving (replaced by {@link Harness.adoptSuccessor}). */
  gateway: GatewayProcess;
  readonly baseUrl: string;
  /** The control token the gateway wrote to `<home>/control_token`. */
  controlToken(): string;
  /** A new page in a fresh browser context (no session yet); `viewport` defaults to 1280x800. */
  newPage(viewport?: { width: number; height: number }): Promise<Page>;
  /** The login link the gateway prints (`/?token=<control token>`). */
  loginLink(): string;
  /**
   * Logs the page's browser context in through the login link (which lands on `/`), then opens
   * `path` when it is another page.
   */
  login(page: Page, path?: string): Promise<void>;
  /** `fetch` on the gateway, with the control token when `control` is true. */
  fetch(path: string, init?: RequestInit & { control?: boolean }): Promise<Response>;
  /**
   * Set before asking for a restart: `close()` then also stops a detached successor that was
   * started but never followed (a test that failed half-way).
   */
  restartRequested: boolean;
  /**
   * After a planned restart: waits for the gateway to exit, then plays the supervisor (exit
   * code 75: starts the next process with the same home and port) or adopts the detached
   * successor (exit code 0). Returns the new gateway, not yet ready.
   */
  followRestart(): Promise<GatewayProcess>;
  /** Saves a full-page screenshot as `test-artifacts/browser/<name>.png`. */
  screenshot(page: Page, name: string): Promise<void>;
  close(): Promise<void>;
}

/**
 * Starts the fake model, the gateway (ready) and Chromium; `extraEnv` goes to the gateway too
 * (e.g. a Postgres store).
 */
export async function startHarness(
  extraEnv: Record<string, string> = {},
  /** Written to `<home>/config.yaml` before the gateway starts. */
  configYaml?: string,
): Promise<Harness> {
  const fake = await startFakeOpenAI();
  const temp = createTempDir("keel-browser-");
  if (configYaml !== undefined) writeFileSync(join(temp.path, "config.yaml"), configYaml);
  const port = await freePort();
  const env = {
    OPENAI_BASE_URL: fake.baseUrl,
    OPENAI_API_KEY: "sk-fake",
    KEEL_MODEL: "fake-model",
    ...extraEnv,
  };
  const gateways: GatewayProcess[] = [await startGatewayProcess({ home: temp.path, port, env })];
  const contexts: BrowserContext[] = [];
  let browser: Browser | undefined;
  const harness: Harness = {
    fake,
    home: temp.path,
    port,
    gateway: gateways[0]!,
    baseUrl: `http://127.0.0.1:${port}`,
    restartRequested: false,
    controlToken: () => readFileSync(join(temp.path, "control_token"), "utf8").trim(),
    async newPage(viewport = { width: 1280, height: 800 }) {
      if (!existsSync(CHROMIUM)) {
        throw new Error(
          `${CHROMIUM} is missing: install Debian's chromium package (.ci/run does).`,
        );
      }
      browser ??= await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
      const context = await browser.newContext({ viewport });
      contexts.push(context);
      return context.newPage();
    },
    loginLink: () => `${harness.baseUrl}/?token=${encodeURIComponent(harness.controlToken())}`,
    async login(page, path = "/") {
      await page.goto(harness.loginLink());
      if (new URL(page.url()).pathname !== "/" || new URL(page.url()).search !== "") {
        throw new Error(`the login link did not land on / but on ${page.url()}`);
      }
      if (path !== "/") await page.goto(`${harness.baseUrl}${path}`);
    },
    fetch(path, init = {}) {
      const { control, ...rest } = init;
      const headers = new Headers(rest.headers);
      if (control) headers.set("authorization", `Bearer ${harness.controlToken()}`);
      return fetch(`${harness.baseUrl}${path}`, { ...rest, headers });
    },
    async followRestart() {
      const next = await followRestart(harness.gateway);
      gateways.push(next);
      harness.gateway = next;
      return next;
    },
    async screenshot(page, name) {
      mkdirSync(ARTIFACTS, { recursive: true });
      await page.screenshot({
        path: join(ARTIFACTS, `${name}.png`),
        fullPage: true,
        animations: "disabled",
      });
    },
    async close() {
      for (const context of contexts) await context.close().catch(() => {});
      await browser?.close().catch(() => {});
      for (const gateway of gateways) await gateway.stop().catch(() => {});
      if (harness.restartRequested && gateways.length === 1) {
        const orphan = await adoptSuccessor(gateways[0]!, 5000).catch(() => null);
        await orphan?.stop().catch(() => {});
      }
      await fake.close();
      temp.cleanup();
    },
  };
  try {
    await harness.gateway.waitForReady();
  } catch (error) {
    await harness.close();
    throw error;
  }
  return harness;
}
