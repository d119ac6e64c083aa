/**
 * Slack through the real gateway in this process (composition root, store, runner, outbox,
 * agent) against the stand-in Slack and the fake model.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config/load-config.js";
import type { Gateway } from "../../src/gateway/gateway.js";
import { PAIRING_APPROVED_NOTICE } from "../../src/platforms/chat-access.js";
import { ONLINE_NOTICE } from "../../src/runner/lifecycle-texts.js";
import { type FakeOpenAI, startFakeOpenAI } from "../fakes/openai-server.js";
import { BOT_USER_ID, type FakeSlack, startFakeSlack } from "../fakes/slack-server.js";
import { createTestGateway, stopTestGateway } from "../helpers/in-process-gateway.js";
import { createTempDir } from "../helpers/temp-home.js";
import { waitFor } from "../helpers/wait-for.js";

const OWNER = "UOWNER";

describe("Slack through the real gateway", () => {
  let home: ReturnType<typeof createTempDir>;
  let slack: FakeSlack;
  let model: FakeOpenAI;
  let gateway: Gateway | undefined;

  beforeEach(async () => {
    home = createTempDir("keel-slack-gw-");
    slack = await startFakeSlack();
    model = await startFakeOpenAI();
  });

  afterEach(async () => {
    await stopTestGateway(gateway);
    gateway = undefined;
    await slack.close();
    await model.close();
    home.cleanup();
  });

  async function start(
    env: Record<string, string> = {},
    options: Parameters<typeof createTestGateway>[1] = {},
  ): Promise<Gateway> {
    const { config } = loadConfig({
      home: home.path,
      env: {
        SLACK_APP_TOKEN: slack.appToken,
        SLACK_BOT_TOKEN: slack.botToken,
        SLACK_API_ROOT: slack.apiRoot,
        SLACK_ALLOWED_USERS: OWNER,
        OPENAI_BASE_URL: model.baseUrl,
        KEEL_MODEL: "fake-model",
        KEEL_HTTP_PORT: "0",
        KEEL_WEBCHAT_ENABLED: "false",
        ...env,
      },
    });
    gateway = createTestGateway(config, options);
    await gateway.start();
    return gateway;
  }

  const texts = (channel: string, thread?: string) =>
    slack.botMessages(channel, thread).map((m) => m.text);

  it("answers a DM and reports Slack connected in the status and gateway_state.json", async () => {
    const gw = await start();
    slack.userPosts({ channel: "D1", user: OWNER, text: "echo: hello slack" });
    await waitFor(() => texts("D1").length > 0, { message: "DM answered" });
    expect(texts("D1")).toEqual(["hello slack"]);
    expect(slack.botMessages("D1")[0]!.thread_ts).toBeUndefined();
    expect((await gw.status()).platforms.slack).toEqual({
      state: "connected",
      error: null,
      // The DM just answered was its last event.
      last_event_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
      last_event_age_s: expect.any(Number),
    });
    const state = JSON.parse(readFileSync(join(home.path, "gateway_state.json"), "utf8"));
    expect(state.platforms.slack).toEqual({ state: "connected", error: null });
  });

  it("a channel mention is one turn even though it arrives twice, answered in its thread, which is then a session", async () => {
    await start();
    const root = slack.userPosts({
      channel: "C1",
      user: OWNER,
      text: `<@${BOT_USER_ID}> echo: first answer`,
    });
    await waitFor(() => texts("C1", root).length > 0, { message: "thread answer" });
    expect(slack.envelopes.map((e) => e.event.type)).toEqual(["message", "app_mention"]);
    await waitFor(() => slack.envelopes.every((e) => e.acked), { message: "both acked" });
    expect(model.requests).toHaveLength(1);
    // A reply in the thread needs no mention: the thread is Keel's session.
    slack.userPosts({ channel: "C1", user: OWNER, text: "echo: second answer", threadTs: root });
    await waitFor(() => texts("C1", root).length > 1, { message: "follow-up answered" });
    expect(texts("C1", root)).toEqual(["first answer", "second answer"]);
    expect(model.requests).toHaveLength(2);
    const history = model.requests[1]!.messages.map((m) => m.content);
    expect(history).toContain("echo: first answer");
    // Chatter in the channel without a mention is not Keel's.
    slack.userPosts({ channel: "C1", user: OWNER, text: "echo: not for the bot" });
    slack.userPosts({ channel: "D1", user: OWNER, text: "echo: marker" });
    await waitFor(() => texts("D1").length > 0, { message: "marker answered" });
    expect(model.requests).toHaveLength(3);
    expect(slack.botMessages("C1").map((m) => m.text)).not.toContain("not for the bot");
  });

  it("a reply whose answer was lost is retried by the outbox without a second post", async () => {
    await start();
    slack.fail("chat.postMessage", { kind: "drop_after" });
    slack.userPosts({ channel: "D1", user: OWNER, text: "echo: exactly once" });
    await waitFor(
      () => slack.calls.some((c) => c.method === "conversations.history" && c.outcome === "ok"),
      { timeoutMs: 15_000, message: "outbox retry looked the post up" },
    );
    await waitFor(async () => (await gateway!.store.listPendingOutbox()).length === 0, {
      message: "row delivered",
    });
    expect(texts("D1")).toEqual(["exactly once"]);
  });

  it("!new starts a fresh session from Slack", async () => {
    await start();
    slack.userPosts({ channel: "D1", user: OWNER, text: "echo: one" });
    await waitFor(() => texts("D1").length === 1);
    slack.userPosts({ channel: "D1", user: OWNER, text: "!new" });
    await waitFor(() => texts("D1").length === 2, { message: "/new answered" });
    expect(texts("D1")[1]).toMatch(/fresh|new/i);
  });

  it("a planned restart greets the configured home channel once the gateway is back", async () => {
    const gw = await start({ SLACK_HOME_CHANNEL: "CHOME" }, { supervisor: "container" });
    await gw.restart();
    expect(await gw.exited).toBe(75);
    gateway = undefined;
    await start({ SLACK_HOME_CHANNEL: "CHOME" });
    await waitFor(() => texts("CHOME").length > 0, { message: "home greeting" });
    expect(texts("CHOME")).toEqual([ONLINE_NOTICE]);
  });

  it("pairing: a stranger's DM gets a code; once approved they are told so and answered", async () => {
    const gw = await start();
    slack.userPosts({ channel: "D5", user: "UNEW", text: "echo: let me in" });
    await waitFor(() => texts("D5").length === 1, { message: "pairing answer" });
    const [request] = await gw.store.listPairingRequests("slack");
    expect(texts("D5")[0]).toContain(request!.code);
    expect(model.requests).toHaveLength(0);
    // What `keel pairing approve CODE` does; the gateway's outbox sweep sends the notice.
    await gw.store.approvePairing(request!.code, PAIRING_APPROVED_NOTICE);
    await waitFor(() => texts("D5").length === 2, {
      timeoutMs: 15_000,
      message: "approval notice",
    });
    expect(texts("D5")[1]).toBe(PAIRING_APPROVED_NOTICE);
    slack.userPosts({ channel: "D5", user: "UNEW", text: "echo: thanks" });
    await waitFor(() => texts("D5").includes("thanks"), { message: "answered after approval" });
  });
});
