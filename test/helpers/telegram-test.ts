/**
 * `telegramTest`: vitest's `it` with a fresh Telegram harness per test. Kept apart from
 * in-process-gateway.ts, which the bench and the chaos rig import outside vitest.
 */
import { it } from "vitest";
import { createTelegramGateway, type TelegramGatewayHarness } from "./in-process-gateway.js";

/**
 * `it` with a fresh Telegram harness per test as `h`, closed after it. Tests that use it keep no
 * state outside `h`, so their files run them at once (`describe.concurrent`): they mostly wait
 * on the chat's pace, retries and timeouts.
 */
export const telegramTest = it.extend<{ h: TelegramGatewayHarness }>({
  // biome-ignore lint/correctness/noEmptyPattern: vitest reads a fixture's dependencies from this pattern
  h: async ({}, use) => {
    const h = await createTelegramGateway();
    await use(h);
    await h.close();
  },
});
