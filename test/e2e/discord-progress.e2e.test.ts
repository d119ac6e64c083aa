/**
 * A streamed Discord reply across a crash, with the real gateway process: SIGKILL while the reply
 * is being written; after the restart the cut-off message keeps what was seen and says it was
 * interrupted, and exactly one complete final answer is visible.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { INTERRUPTED_MARK } from "../../src/platforms/stream-editor.js";
import { type FakeDiscord, type FakeUser, startFakeDiscord } from "../fakes/discord-server.js";
import { type FakeOpenAI, startFakeOpenAI } from "../fakes/openai-server.js";
import {
  bootedPids,
  type GatewayProcess,
  startGatewayProcess,
} from "../helpers/gateway-process.js";
import { createTempDir } from "../helpers/temp-home.js";
import { waitFor } from "../helpers/wait-for.js";

const TOKEN = "discord-progress-e2e-token";
const USER: FakeUser = { id: "200000000000000009", username: "owner" };
const MARK = INTERRUPTED_MARK.trim();

function sentences(count: number): string {
  return Array.from({ length: count }, (_, i) => `Sentence number ${i + 1} is here.`).join(" ");
}

describe("a streamed Discord reply across SIGKILL (real processes)", () => {
  let home: ReturnType<typeof createTempDir>;
  let discord: FakeDiscord;
  let model: FakeOpenAI;
  const spawned: GatewayProcess[] = [];

  beforeEach(async () => {
    home = createTempDir("keel-discord-progress-e2e-");
    discord = await startFakeDiscord({ token: TOKEN });
    model = await startFakeOpenAI();
  });

  afterEach(async () => {
    for (const gateway of spawned.splice(0)) await gateway.stop();
    await discord.close();
    await model.close();
    home.cleanup();
  });

  async function start(): Promise<GatewayProcess> {
    const boots = bootedPids(home.path).length;
    const gateway = await startGatewayProcess({
      home: home.path,
      env: {
        DISCORD_BOT_TOKEN: TOKEN,
        DISCORD_API_ROOT: discord.apiRoot,
        DISCORD_ALLOWED_USERS: USER.id,
        OPENAI_BASE_URL: model.baseUrl,
        KEEL_MODEL: "fake-model",
        KEEL_HTTP_PORT: "0",
        KEEL_API_ENABLED: "false",
        KEEL_WEBCHAT_ENABLED: "false",
      },
    });
    spawned.push(gateway);
    await waitFor(() => bootedPids(home.path).length > boots, {
      timeoutMs: 20_000,
      message: `gateway running\n${gateway.output().slice(-2000)}`,
    });
    return gateway;
  }

  it("SIGKILL mid-stream: the cut-off message says so, and one complete answer follows", async () => {
    const partial = sentences(80);
    let calls = 0;
    model.script(() =>
      ++calls === 1 ? { text: partial, chunkDelayMs: 150 } : { text: "The resumed answer." },
    );
    const dm = discord.dmChannel(USER.id);
    const bot = () => discord.botMessages(dm);
    const gateway = await start();
    await waitFor(() => discord.connections() > 0 && discord.sessionIds().length > 0, {
      timeoutMs: 20_000,
      message: "discord connected",
    });
    discord.userSends({ channelId: dm, user: USER, content: "write a long answer" });
    const seen = await waitFor(
      () => {
        const [message] = bot();
        return message && message.content.length > 60 ? message.content : null;
      },
      { timeoutMs: 20_000, message: "preview shown" },
    );
    gateway.kill("SIGKILL");
    await gateway.waitForExit(10_000);
    await start();
    const chat = () => JSON.stringify(bot().map((m) => m.content));
    await waitFor(() => bot().some((m) => m.content === "The resumed answer."), {
      timeoutMs: 30_000,
      message: `resumed answer; chat: ${chat()}`,
    });
    const cut = await waitFor(() => bot().find((m) => m.content.endsWith(MARK)), {
      timeoutMs: 15_000,
      message: `interrupted mark; chat: ${chat()}`,
    });
    // The mark keeps what the user had already seen.
    expect(cut.content.startsWith(seen)).toBe(true);
    expect(partial.startsWith(cut.content.slice(0, -INTERRUPTED_MARK.length))).toBe(true);
    expect(bot().filter((m) => m.content === "The resumed answer.")).toHaveLength(1);
    // No other message shows (a part of) an answer.
    expect(bot().filter((m) => m.content.startsWith("Sentence"))).toHaveLength(1);
  });
});
