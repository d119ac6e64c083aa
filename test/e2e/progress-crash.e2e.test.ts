/**
 * A streamed Discord or Slack reply across a crash, with the real gateway process: SIGKILL while
 * the reply is being written; after the restart the cut-off message keeps what was seen and says
 * it was interrupted, and exactly one complete final answer is visible. The scenario is the same
 * on both platforms; only how the stand-in is started, asked and read differs.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { INTERRUPTED_MARK } from "../../src/platforms/stream-editor.js";
import { type FakeUser, startFakeDiscord } from "../fakes/discord-server.js";
import { type FakeOpenAI, startFakeOpenAI } from "../fakes/openai-server.js";
import { startFakeSlack } from "../fakes/slack-server.js";
import {
  bootedPids,
  type GatewayProcess,
  startGatewayProcess,
} from "../helpers/gateway-process.js";
import { createTempDir } from "../helpers/temp-home.js";
import { waitFor } from "../helpers/wait-for.js";

const MARK = INTERRUPTED_MARK.trim();

function sentences(count: number): string {
  return Array.from({ length: count }, (_, i) => `Sentence number ${i + 1} is here.`).join(" ");
}

/** A stand-in platform as this test uses it: the owner's DM, seen as the texts the bot posted. */
interface StandIn {
  /** The gateway's environment that enables the platform against the stand-in. */
  env: Record<string, string>;
  connected(): boolean;
  ask(text: string): void;
  /** The bot's messages in the owner's DM, oldest first. */
  texts(): string[];
  close(): Promise<void>;
}

const DISCORD_TOKEN = "discord-progress-e2e-token";
const DISCORD_USER: FakeUser = { id: "200000000000000009", username: "owner" };
const SLACK_OWNER = "UOWNER";
const SLACK_DM = "D1";

const PLATFORMS: { name: string; open(): Promise<StandIn> }[] = [
  {
    name: "Discord",
    async open() {
      const discord = await startFakeDiscord({ token: DISCORD_TOKEN });
      const dm = discord.dmChannel(DISCORD_USER.id);
      return {
        env: {
          DISCORD_BOT_TOKEN: DISCORD_TOKEN,
          DISCORD_API_ROOT: discord.apiRoot,
          DISCORD_ALLOWED_USERS: DISCORD_USER.id,
        },
        connected: () => discord.connections() > 0 && discord.sessionIds().length > 0,
        ask: (content) => void discord.userSends({ channelId: dm, user: DISCORD_USER, content }),
        texts: () => discord.botMessages(dm).map((m) => m.content),
        close: () => discord.close(),
      };
    },
  },
  {
    name: "Slack",
    async open() {
      const slack = await startFakeSlack();
      return {
        env: {
          SLACK_APP_TOKEN: slack.appToken,
          SLACK_BOT_TOKEN: slack.botToken,
          SLACK_API_ROOT: slack.apiRoot,
          SLACK_ALLOWED_USERS: SLACK_OWNER,
        },
        connected: () => slack.openConnections() > 0,
        ask: (text) => void slack.userPosts({ channel: SLACK_DM, user: SLACK_OWNER, text }),
        texts: () => slack.botMessages(SLACK_DM).map((m) => m.text),
        close: () => slack.close(),
      };
    },
  },
];

describe.each(PLATFORMS)("a streamed $name reply across SIGKILL (real processes)", (platform) => {
  let home: ReturnType<typeof createTempDir>;
  let standIn: StandIn;
  let model: FakeOpenAI;
  const spawned: GatewayProcess[] = [];

  beforeEach(async () => {
    home = createTempDir("keel-progress-crash-e2e-");
    standIn = await platform.open();
    model = await startFakeOpenAI();
  });

  afterEach(async () => {
    for (const gateway of spawned.splice(0)) await gateway.stop();
    await standIn.close();
    await model.close();
    home.cleanup();
  });

  async function start(): Promise<GatewayProcess> {
    const boots = bootedPids(home.path).length;
    const gateway = await startGatewayProcess({
      home: home.path,
      env: {
        ...standIn.env,
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
    const texts = () => standIn.texts();
    const gateway = await start();
    await waitFor(() => standIn.connected(), {
      timeoutMs: 20_000,
      message: `${platform.name} connected`,
    });
    standIn.ask("write a long answer");
    const seen = await waitFor(
      () => {
        const [text] = texts();
        return text && text.length > 60 ? text : null;
      },
      { timeoutMs: 20_000, message: "preview shown" },
    );
    gateway.kill("SIGKILL");
    await gateway.waitForExit(10_000);
    await start();
    const chat = () => JSON.stringify(texts());
    await waitFor(() => texts().includes("The resumed answer."), {
      timeoutMs: 30_000,
      message: `resumed answer; chat: ${chat()}`,
    });
    const cut = await waitFor(() => texts().find((text) => text.endsWith(MARK)), {
      timeoutMs: 15_000,
      message: `interrupted mark; chat: ${chat()}`,
    });
    // The mark keeps what the user had already seen.
    expect(cut.startsWith(seen)).toBe(true);
    expect(partial.startsWith(cut.slice(0, -INTERRUPTED_MARK.length))).toBe(true);
    expect(texts().filter((text) => text === "The resumed answer.")).toHaveLength(1);
    // No other message shows (a part of) an answer.
    expect(texts().filter((text) => text.startsWith("Sentence"))).toHaveLength(1);
  });
});
