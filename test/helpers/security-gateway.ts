/**
 * A real gateway in this process for the attacker's-view tests (http-security, http-guessing):
 * fresh home, port 0, web chat and API on, `container` supervisor (restart = 75). Each test file
 * runs `runCleanups` after each test; files in one worker run one after another.
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { expect } from "vitest";
import { loadConfig } from "../../src/config/load-config.js";
import type { Config } from "../../src/config/schema.js";
import type { Gateway } from "../../src/gateway/gateway.js";
import { type FakeOpenAI, startFakeOpenAI } from "../fakes/openai-server.js";
import { createTestGateway, stopTestGateway } from "./in-process-gateway.js";
import { createTempDir } from "./temp-home.js";

export const API_KEY = "api-key-for-clients-0123";

export interface Started {
  gateway: Gateway;
  config: Config;
  port: number;
  base: string;
  token: string;
}

/** What the current test started, undone in reverse order by `runCleanups`. */
export const cleanups: (() => Promise<void> | void)[] = [];
export async function runCleanups(): Promise<void> {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
}

let model: FakeOpenAI | undefined;
export async function fakeModel(): Promise<FakeOpenAI> {
  if (!model) {
    const started = await startFakeOpenAI();
    model = started;
    cleanups.push(async () => {
      model = undefined;
      await started.close();
    });
  }
  return model;
}

/**
 * A gateway on a fresh home, port 0, web chat and API on; `container` supervisor (restart = 75).
 * `yaml` becomes the home's config.yaml (for settings without an environment variable).
 */
export async function start(env: Record<string, string> = {}, yaml?: string): Promise<Started> {
  const fake = await fakeModel();
  const home = createTempDir("keel-sec-");
  if (yaml !== undefined) writeFileSync(join(home.path, "config.yaml"), yaml);
  const { config } = loadConfig({
    home: home.path,
    env: { KEEL_HTTP_PORT: "0", OPENAI_BASE_URL: fake.baseUrl, KEEL_MODEL: "m", ...env },
  });
  const gateway = createTestGateway(config, { supervisor: "container" });
  await gateway.start();
  cleanups.push(async () => {
    await stopTestGateway(gateway);
    home.cleanup();
  });
  const port = gateway.port;
  return { gateway, config, port, base: `http://127.0.0.1:${port}`, token: config.controlToken };
}

export const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
export const json = { "content-type": "application/json" };
export const completion = (text: string) =>
  JSON.stringify({ messages: [{ role: "user", content: text }] });

export async function stillRunning(s: Started): Promise<void> {
  expect(s.gateway.isReady()).toBe(true);
  expect((await s.gateway.status()).restart_requested).toBe(false);
}
