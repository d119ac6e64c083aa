/**
 * Slack end to end: the built gateway process against the stand-in Slack (Socket Mode + Web API)
 * and the fake model, killed with SIGKILL while Slack events are in flight.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { ONLINE_NOTICE, RESTARTED_NOTICE, STOP_NOTICE } from "../../src/runner/lifecycle-texts.js";
import { defaultScript, type FakeOpenAI, startFakeOpenAI } from "../fakes/openai-server.js";
import { BOT_USER_ID, type FakeSlack, startFakeSlack } from "../fakes/slack-server.js";
import {
  bootedPids,
  freePort,
  type GatewayProcess,
  startGatewayProcess,
} from "../helpers/gateway-process.js";
import { createTempDir } from "../helpers/temp-home.js";
import { waitFor } from "../helpers/wait-for.js";

const USERS = ["UANN", "UBOB", "UCAT"];
/** The one user with operator rights. */
const ADMIN = "UADMIN";
/** Users whose messages arrive in a burst right before the kill. */
const BURST = ["UB1", "UB2", "UB3", "UB4", "UB5", "UB6"];

describe("Slack with the real gateway process", () => {
  let home: ReturnType<typeof createTempDir>;
  let slack: FakeSlack;
  let model: FakeOpenAI;
  let port: number;
  const spawned: GatewayProcess[] = [];

  beforeEach(async () => {
    home = createTempDir("keel-slack-e2e-");
    slack = await startFakeSlack();
    model = await startFakeOpenAI();
    port = await freePort();
  });

  afterEach(async () => {
    for (const gateway of spawned.splice(0)) await gateway.stop();
    await slack.close();
    await model.close();
    home.cleanup();
  });

  async function start(extra: Record<string, string> = {}): Promise<GatewayProcess> {
    const gateway = await startGatewayProcess({
      home: home.path,
      restartOnExit75: true,
      followSuccessor: true,
      env: {
        SLACK_APP_TOKEN: slack.appToken,
        SLACK_BOT_TOKEN: slack.botToken,
        SLACK_API_ROOT: slack.apiRoot,
        SLACK_ALLOWED_USERS: [...USERS, ...BURST].join(","),
        SLACK_ADMIN_USERS: ADMIN,
        SLACK_HOME_CHANNEL: "CHOME",
        OPENAI_BASE_URL: model.baseUrl,
        KEEL_MODEL: "fake-model",
        KEEL_HTTP_PORT: String(port),
        KEEL_WEBCHAT_ENABLED: "false",
        KEEL_LOG_LEVEL: "debug",
        ...extra,
      },
    });
    spawned.push(gateway);
    return gateway;
  }

  async function startRunning(extra: Record<string, string> = {}): Promise<GatewayProcess> {
    const boots = bootedPids(home.path).length;
    const gateway = await start(extra);
    await waitFor(() => bootedPids(home.path).length > boots, {
      timeoutMs: 20_000,
      message: `gateway running\n${gateway.output().slice(-2000)}`,
    });
    return gateway;
  }

  const texts = (channel: string, thread?: string) =>
    slack.botMessages(channel, thread).map((m) => m.text);

  it("SIGKILL with turns running and events unacknowledged: every message answered exactly once after the restart", async () => {
    // Every model call hangs until the kill, so the turns are cut off mid-way.
    let hold = true;
    model.script((request) => (hold ? { hang: true } : defaultScript(request)));
    let gateway = await startRunning();
    const dms = USERS.map((user, i) => {
      const channel = `D${i + 1}`;
      slack.userPosts({ channel, user, text: `echo: answer ${user}` });
      return channel;
    });
    const root = slack.userPosts({
      channel: "C1",
      user: USERS[0]!,
      text: `<@${BOT_USER_ID}> echo: answer in thread`,
    });
    await waitFor(() => model.requests.length >= 4, {
      timeoutMs: 20_000,
      message: "four turns with the model",
    });
    // A burst right before the kill: whatever each reached (not received, stored, acknowledged),
    // it must be answered once.
    const burst = BURST.map((user, i) => {
      const channel = `DB${i + 1}`;
      slack.userPosts({ channel, user, text: `echo: burst ${user}` });
      return channel;
    });
    gateway.kill("SIGKILL");
    await gateway.waitForExit(10_000);
    // Sent while Keel is down: Slack keeps them for the next connection.
    slack.userPosts({ channel: "D9", user: USERS[1]!, text: "echo: sent while down" });
    hold = false;
    gateway = await startRunning();
    const expected: [string, string | undefined, string][] = [
      ...dms.map((channel, i): [string, undefined, string] => [
        channel,
        undefined,
        `answer ${USERS[i]}`,
      ]),
      ["C1", root, "answer in thread"],
      ["D9", undefined, "sent while down"],
      ...burst.map((channel, i): [string, undefined, string] => [
        channel,
        undefined,
        `burst ${BURST[i]}`,
      ]),
    ];
    await waitFor(() => expected.every(([c, t, text]) => texts(c, t).includes(text)), {
      timeoutMs: 30_000,
      message: `all answered: ${JSON.stringify(expected.map(([c, t]) => texts(c, t)))}`,
    });
    // Let anything late arrive before counting: a marker turn after everything else.
    slack.userPosts({ channel: "D8", user: USERS[2]!, text: "echo: marker" });
    await waitFor(() => texts("D8").includes("marker"), { timeoutMs: 15_000 });
    for (const [channel, thread, text] of expected) {
      expect(
        texts(channel, thread).filter((t) => t === text),
        `${channel}: ${JSON.stringify(texts(channel, thread))}`,
      ).toHaveLength(1);
    }
    // The channel mention came as message + app_mention: one turn before the kill.
    expect(
      model.requests.filter((r) => JSON.stringify(r).includes("answer in thread")).length,
    ).toBeGreaterThanOrEqual(1);
    expect(slack.envelopes.every((e) => e.acked)).toBe(true);
  }, 120_000);

  it("a crash after the commit and before the ack: Slack redelivers, the message is answered once", async () => {
    const first = await start({ KEEL_CRASH_POINT: "after_inbox_commit:1" });
    await waitFor(() => slack.openConnections() === 1, {
      timeoutMs: 20_000,
      message: `connected\n${first.output().slice(-2000)}`,
    });
    slack.userPosts({ channel: "D1", user: USERS[0]!, text: "echo: committed, never acked" });
    const exit = await first.waitForExit(20_000);
    expect(exit.signal).toBe("SIGKILL");
    expect(slack.envelopes[0]!.acked).toBe(false);
    await startRunning();
    await waitFor(() => texts("D1").includes("committed, never acked"), { timeoutMs: 20_000 });
    await waitFor(() => slack.envelopes[0]!.acked, { message: "redelivery acked" });
    expect(slack.envelopes[0]!.deliveries).toBe(2);
    slack.userPosts({ channel: "D1", user: USERS[0]!, text: "echo: marker" });
    await waitFor(() => texts("D1").includes("marker"), { timeoutMs: 15_000 });
    expect(texts("D1")).toEqual(["committed, never acked", "marker"]);
    expect(model.requests).toHaveLength(2);
  }, 90_000);

  it("a crash after the reply was posted but before it was marked delivered: not posted again", async () => {
    const first = await start({ KEEL_CRASH_POINT: "after_reply_sent:1" });
    await waitFor(() => slack.openConnections() === 1, {
      timeoutMs: 20_000,
      message: `connected\n${first.output().slice(-2000)}`,
    });
    slack.userPosts({ channel: "D1", user: USERS[0]!, text: "echo: posted before the crash" });
    await first.waitForExit(20_000);
    expect(texts("D1")).toEqual(["posted before the crash"]);
    await startRunning();
    await waitFor(
      () => slack.calls.some((c) => c.method === "conversations.history" && c.outcome === "ok"),
      { timeoutMs: 20_000, message: "the pending row was looked up" },
    );
    slack.userPosts({ channel: "D1", user: USERS[0]!, text: "echo: marker" });
    await waitFor(() => texts("D1").includes("marker"), { timeoutMs: 15_000 });
    expect(texts("D1")).toEqual(["posted before the crash", "marker"]);
  }, 90_000);

  it("!restart from a Slack thread: only an admin may; the thread hears it restarted, the home channel stays quiet", async () => {
    const first = await startRunning();
    const root = slack.userPosts({
      channel: "C1",
      user: ADMIN,
      text: `<@${BOT_USER_ID}> echo: hi`,
    });
    await waitFor(() => texts("C1", root).includes("hi"), { timeoutMs: 15_000 });
    slack.userPosts({ channel: "C1", user: USERS[0]!, text: "!restart", threadTs: root });
    await waitFor(() => texts("C1", root).length === 2, { timeoutMs: 15_000 });
    expect(texts("C1", root)[1]).toMatch(/operator/i);
    slack.userPosts({ channel: "C1", user: ADMIN, text: "!restart", threadTs: root });
    await waitFor(() => texts("C1", root).includes(RESTARTED_NOTICE), {
      timeoutMs: 30_000,
      message: `restarted notice: ${JSON.stringify(texts("C1", root))}\n${first.output().slice(-2000)}`,
    });
    await waitFor(() => bootedPids(home.path).length >= 2, { timeoutMs: 30_000 });
    slack.userPosts({ channel: "C1", user: ADMIN, text: "echo: after", threadTs: root });
    await waitFor(() => texts("C1", root).includes("after"), { timeoutMs: 15_000 });
    expect(texts("C1", root).filter((t) => t === RESTARTED_NOTICE)).toHaveLength(1);
    // A restart asked from a chat greets that chat, not the home channel.
    expect(slack.botMessages("CHOME").map((m) => m.text)).not.toContain(ONLINE_NOTICE);
  }, 90_000);

  it("a dropped socket (1006) reconnects, and a 429 on the reply delays it without a duplicate", async () => {
    const gateway = await startRunning();
    await waitFor(() => slack.openConnections() === 1, { timeoutMs: 10_000 });
    const status = (await (await gateway.control("/api/status")).json()) as {
      platforms: Record<string, unknown>;
    };
    expect(status.platforms.slack).toMatchObject({ state: "connected", error: null });
    slack.dropSockets();
    await waitFor(() => slack.connectionsOpened() === 2 && slack.openConnections() === 1, {
      timeoutMs: 20_000,
      message: "reconnected after the drop",
    });
    slack.fail("chat.postMessage", { kind: "rate_limited", retryAfter: 1 });
    slack.userPosts({ channel: "D1", user: USERS[0]!, text: "echo: after the drop" });
    await waitFor(() => texts("D1").includes("after the drop"), { timeoutMs: 20_000 });
    const posts = slack.calls.filter((c) => c.method === "chat.postMessage");
    expect(posts.map((c) => c.outcome)).toEqual(["rate_limited", "ok"]);
    slack.userPosts({ channel: "D1", user: USERS[0]!, text: "echo: marker" });
    await waitFor(() => texts("D1").includes("marker"), { timeoutMs: 15_000 });
    expect(texts("D1")).toEqual(["after the drop", "marker"]);
  }, 60_000);

  it("SIGTERM during a turn in a thread: the thread hears of the stop, and the turn resumes there after the next start", async () => {
    const first = await startRunning();
    const root = slack.userPosts({
      channel: "C2",
      user: USERS[0]!,
      text: `<@${BOT_USER_ID}> slow: 2000 resumed answer`,
    });
    await waitFor(() => model.requests.length >= 1, { timeoutMs: 15_000 });
    first.kill("SIGTERM");
    await first.waitForExit(20_000);
    expect(texts("C2", root)).toEqual([STOP_NOTICE]);
    await startRunning();
    await waitFor(() => texts("C2", root).includes("resumed answer"), { timeoutMs: 20_000 });
    expect(texts("C2", root)).toEqual([STOP_NOTICE, "resumed answer"]);
  }, 60_000);
});
