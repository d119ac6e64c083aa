/**
 * `platformTest`: vitest's `it` with a fresh home folder, a fake model and a gateway launcher per
 * test, all closed after it. The Discord and Slack progress tests extend it with their stand-in
 * platform.
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { it } from "vitest";
import type { Gateway } from "../../src/gateway/gateway.js";
import { type FakeOpenAI, startFakeOpenAI } from "../fakes/openai-server.js";
import { startPlatformGateway, stopTestGateway } from "./in-process-gateway.js";
import { createTempDir } from "./temp-home.js";

interface PlatformFixtures {
  home: string;
  model: FakeOpenAI;
  /**
   * Starts a gateway on the home and model with `platform` enabled by `env`, and `yaml` as its
   * config.yaml when given; stopped after the test.
   */
  launch: (platform: string, env: Record<string, string>, yaml?: string) => Promise<Gateway>;
}

export const platformTest = it.extend<PlatformFixtures>({
  // biome-ignore lint/correctness/noEmptyPattern: vitest reads a fixture's dependencies from this pattern
  home: async ({}, use) => {
    const dir = createTempDir("keel-platform-");
    await use(dir.path);
    dir.cleanup();
  },
  // biome-ignore lint/correctness/noEmptyPattern: as above
  model: async ({}, use) => {
    const model = await startFakeOpenAI();
    await use(model);
    await model.close();
  },
  launch: async ({ home, model }, use) => {
    const started: Gateway[] = [];
    await use(async (platform, env, yaml) => {
      if (yaml) writeFileSync(join(home, "config.yaml"), yaml);
      const gateway = await startPlatformGateway({
        home,
        modelBaseUrl: model.baseUrl,
        platform,
        env,
      });
      started.push(gateway);
      return gateway;
    });
    for (const gateway of started.reverse()) await stopTestGateway(gateway);
  },
});
