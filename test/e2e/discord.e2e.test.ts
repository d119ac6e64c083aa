/**
 * Discord end to end: the real gateway process against the stand-in Discord (REST + WebSocket
 * gateway) and the stand-in model, killed with SIGKILL while Discord messages are in flight.
 */

import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { RESTARTED_NOTICE } from "../../src/runner/lifecycle-texts.js";
import { SqliteStore } from "../../src/sessions/sqlite-store.js";
import { type FakeDiscord, type FakeUser, startFakeDiscord } from "../fakes/discord-server.js";
import { defaultScript, type FakeOpenAI, startFakeOpenAI } from "../fakes/openai-server.js";
import {
  bootedPids,
  freePort,
  type GatewayProcess,
  readGatewayState,
  runKeel,
  startGatewayProcess,
} from "../helpers/gateway-process.js";
import { createTempDir } from "../helpers/temp-home.js";
import { waitFor } from "../helpers/wait-for.js";

const TOKEN = "discord-e2e-token";
const USERS: FakeUser[] = [1, 2, 3, 4].map((n) => ({
  id: `20000000000000000${n}`,
  username: `user${n}`,
}));

describe("Discord on the real gateway process", () => {
  let home: ReturnType<typeof createTempDir>;
  let discord: FakeDiscord;
  let model: FakeOpenAI;
  let port: number;
  const spawned: GatewayProcess[] = [];

  beforeEach(async () => {
    home = createTempDir("keel-discord-e2e-");
    discord = await startFakeDiscord({ token: TOKEN });
    model = await startFakeOpenAI();
    port = await freePort();
  });

  afterEach(async () => {
    for (const gateway of spawned.splice(0)) await gateway.stop();
    await discord.close();
    await model.close();
    home.cleanup();
  });

  async function start(extra: Record<string, string> = {}): Promise<GatewayProcess> {
    const boots = bootedPids(home.path).length;
    const gateway = await spawn(extra);
    await waitFor(() => bootedPids(home.path).length > boots, {
      timeoutMs: 20_000,
      message: `gateway running\n${gateway.output().slice(-2000)}`,
    });
    return gateway;
  }

  /** Starts a gateway process without waiting for it to boot (it may be meant to crash first). */
  async function spawn(extra: Record<string, string> = {}): Promise<GatewayProcess> {
    const gateway = await startGatewayProcess({
      home: home.path,
      port,
      restartOnExit75: true,
      followSuccessor: true,
      env: {
        DISCORD_ADMIN_USERS: USERS[0]!.id,
        DISCORD_BOT_TOKEN: TOKEN,
        DISCORD_API_ROOT: discord.apiRoot,
        DISCORD_ALLOWED_USERS: USERS.map((u) => u.id).join(","),
        OPENAI_BASE_URL: model.baseUrl,
        KEEL_MODEL: "fake-model",
        KEEL_LOG_LEVEL: "debug",
        ...extra,
      },
    });
    spawned.push(gateway);
    return gateway;
  }

  const discordState = () =>
    (readGatewayState(home.path)?.platforms as Record<string, { state: string }> | undefined)
      ?.discord?.state;

  /** How often the bot posted `text` anywhere. */
  const posted = (text: string) => discord.allBotMessages().filter((m) => m.content === text);

  it("SIGKILL with turns in flight and messages sent while down: RESUME with the stored session, each answered once", async () => {
    let hold = true;
    model.script((request) => (hold ? { hang: true } : defaultScript(request)));
    const gateway = await start();
    await waitFor(() => discordState() === "connected", {
      timeoutMs: 15_000,
      message: "discord connected in gateway_state.json",
    });
    const dms = USERS.map((u) => discord.dmChannel(u.id));
    const channel = discord.createGuildChannel();
    const sent = USERS.slice(0, 3).map((user, i) =>
      discord.userSends({ channelId: dms[i]!, user, content: `echo: answer ${i}` }),
    );
    await waitFor(() => model.requests.length >= 3, {
      timeoutMs: 20_000,
      message: "three turns with the model",
    });
    gateway.kill("SIGKILL");
    await gateway.waitForExit(10_000);

    // Sent while Keel is down: only a RESUME (Discord's replay) brings these.
    const whileDown = [
      discord.userSends({ channelId: dms[3]!, user: USERS[3]!, content: "echo: answer 3" }),
      discord.userSends({
        channelId: channel,
        user: USERS[0]!,
        content: "echo: answer in a thread",
        mentionBot: true,
      }),
    ];
    hold = false;
    await start();
    const expected = ["answer 0", "answer 1", "answer 2", "answer 3", "answer in a thread"];
    await waitFor(() => expected.every((text) => posted(text).length > 0), {
      timeoutMs: 30_000,
      message: `every message answered: ${JSON.stringify(discord.allBotMessages().map((m) => m.content))}`,
    });
    await waitFor(() => discordState() === "connected", { message: "connected again" });

    // The restart resumed the session READY handed out before the kill: no second identify.
    expect(discord.identifies()).toHaveLength(1);
    expect(discord.resumes().at(-1)?.session_id).toBe(discord.sessionIds()[0]);
    for (const text of expected) expect(posted(text), text).toHaveLength(1);
    // Each answer went where its question was: the DMs, and a thread on the channel mention.
    sent.forEach((message, i) => {
      expect(posted(`answer ${i}`)[0]!.channel_id).toBe(message.channel_id);
    });
    expect(posted("answer 3")[0]!.channel_id).toBe(dms[3]);
    expect(posted("answer in a thread")[0]!.channel_id).toBe(whileDown[1]!.id);
    expect(discord.channel(whileDown[1]!.id)).toEqual({ type: 11, parent_id: channel });
  }, 90_000);

  it("mention gating, a thread as a session, a dropped socket (1006) and a 429 on send: each answered once", async () => {
    await start();
    await waitFor(() => discordState() === "connected", {
      timeoutMs: 15_000,
      message: "connected",
    });
    const user = USERS[1]!;
    const channel = discord.createGuildChannel();
    discord.userSends({ channelId: channel, user, content: "echo: not for the bot" });
    const asked = discord.userSends({
      channelId: channel,
      user,
      content: "echo: in a thread",
      mentionBot: true,
    });
    await waitFor(() => posted("in a thread").length === 1, {
      timeoutMs: 20_000,
      message: "thread answer",
    });
    // Intake is in order: the earlier message without a mention was seen and left alone.
    expect(posted("not for the bot")).toEqual([]);
    expect(posted("in a thread")[0]!.channel_id).toBe(asked.id);
    // In Keel's thread no mention is needed, and it is the same conversation.
    discord.userSends({ channelId: asked.id, user, content: "echo: follow-up" });
    await waitFor(() => posted("follow-up").length === 1, {
      timeoutMs: 20_000,
      message: "follow-up",
    });
    expect(posted("follow-up")[0]!.channel_id).toBe(asked.id);
    const store = new SqliteStore(join(home.path, "state.db"), { readonly: true });
    try {
      const threads = await store.listSessions({ platform: "discord" });
      const thread = threads.find((t) => t.key === `agent:main:discord:thread:${asked.id}`);
      // Both questions and both answers in one transcript.
      expect(thread?.messageCount).toBe(4);
    } finally {
      await store.close();
    }

    const dm = discord.dmChannel(user.id);
    discord.dropConnections();
    discord.userSends({ channelId: dm, user, content: "echo: after 1006" });
    await waitFor(() => posted("after 1006").length === 1, {
      timeoutMs: 20_000,
      message: "after 1006",
    });
    discord.failSends(1, "429", 0.3);
    discord.userSends({ channelId: dm, user, content: "echo: after 429" });
    await waitFor(() => posted("after 429").length === 1, {
      timeoutMs: 20_000,
      message: "after 429",
    });
    expect(discord.identifies()).toHaveLength(1);
    for (const text of ["in a thread", "follow-up", "after 1006", "after 429"]) {
      expect(posted(text), text).toHaveLength(1);
    }
  }, 90_000);

  it("a rejected token shows as Discord's error in `keel gateway status`; the rest of the gateway runs", async () => {
    const gateway = await start({ DISCORD_BOT_TOKEN: "not-the-token" });
    await waitFor(() => discordState() === "error", { timeoutMs: 15_000, message: "error state" });
    const status = await runKeel({
      home: gateway.home,
      args: ["gateway", "status"],
      env: { KEEL_HTTP_PORT: String(port) },
    });
    expect(status.stdout).toMatch(
      // `down`: it stopped trying until an operator acts (the API's connection health).
      /Platforms: .*discord down \(Discord rejected the bot token \(401 Unauthorized\)\. Check platforms\.discord\.token \(DISCORD_BOT_TOKEN\)/,
    );
    expect(status.stdout).not.toContain("not-the-token");
    expect(discord.identifies()).toHaveLength(0);
    expect(gateway.exitStatus).toBeNull();
  }, 60_000);

  it("/restart from a Discord admin: the restart is confirmed once and the new process RESUMEs", async () => {
    await start();
    const dm = discord.dmChannel(USERS[0]!.id);
    discord.userSends({ channelId: dm, user: USERS[0]!, content: "echo: before" });
    await waitFor(() => posted("before").length === 1, { timeoutMs: 20_000, message: "answer" });
    const restart = discord.userSends({ channelId: dm, user: USERS[0]!, content: "/restart" });
    await waitFor(() => posted(RESTARTED_NOTICE).length === 1, {
      timeoutMs: 40_000,
      message: `restarted greeting: ${JSON.stringify(discord.botMessages(dm).map((m) => m.content))}`,
    });
    await waitFor(() => bootedPids(home.path).length === 2, { message: "successor booted" });
    discord.userSends({ channelId: dm, user: USERS[0]!, content: "echo: after" });
    await waitFor(() => posted("after").length === 1, {
      timeoutMs: 20_000,
      message: "answer after",
    });
    expect(posted(RESTARTED_NOTICE)[0]!.message_reference?.message_id).toBe(restart.id);
    // The planned stop closed the socket with a resumable code: one identify in all.
    expect(discord.identifies()).toHaveLength(1);
    expect(discord.resumes().map((r) => r.session_id)).toEqual([discord.sessionIds()[0]]);
    expect(posted("before")).toHaveLength(1);
    expect(posted(RESTARTED_NOTICE)).toHaveLength(1);
  }, 90_000);

  it("killed right after a message was stored, and right after a reply was posted: each answered once", async () => {
    const dm = discord.dmChannel(USERS[2]!.id);
    // Stored in the inbox, killed before its Discord sequence was: the RESUME replays it and the
    // inbox already has it.
    let gateway = await start({ KEEL_CRASH_POINT: "after_inbox_commit" });
    discord.userSends({ channelId: dm, user: USERS[2]!, content: "echo: stored then killed" });
    expect((await gateway.waitForExit(20_000)).signal).toBe("SIGKILL");
    // The stored message is answered during start-up: this process may die before it boots.
    gateway = await spawn({ KEEL_CRASH_POINT: "after_reply_sent" });
    await waitFor(() => posted("stored then killed").length > 0, {
      timeoutMs: 20_000,
      message: "answer after the first kill",
    });
    // Posted, killed before the outbox marked it delivered: the resend carries the same nonce.
    expect((await gateway.waitForExit(20_000)).signal).toBe("SIGKILL");
    await start();
    discord.userSends({ channelId: dm, user: USERS[2]!, content: "echo: afterwards" });
    await waitFor(() => posted("afterwards").length === 1, {
      timeoutMs: 20_000,
      message: "later answer",
    });
    expect(posted("stored then killed")).toHaveLength(1);
    expect(discord.identifies()).toHaveLength(1);
    expect(discord.resumes()).toHaveLength(2);
  }, 90_000);

  it("a session invalidated while Keel was down: identify again and catch up over REST, each answered once", async () => {
    const gateway = await start();
    const dm = discord.dmChannel(USERS[0]!.id);
    discord.userSends({ channelId: dm, user: USERS[0]!, content: "echo: first" });
    await waitFor(() => posted("first").length === 1, {
      timeoutMs: 20_000,
      message: "first answer",
    });
    gateway.kill("SIGKILL");
    await gateway.waitForExit(10_000);

    discord.invalidateSessions();
    discord.userSends({ channelId: dm, user: USERS[0]!, content: "echo: missed one" });
    discord.userSends({ channelId: dm, user: USERS[0]!, content: "echo: missed two" });
    const second = await start();
    // The missed messages are one turn: one call sees both, one reply (the echo of the last).
    await waitFor(() => posted("missed two").length > 0, {
      timeoutMs: 30_000,
      message: `caught up: ${JSON.stringify(discord.allBotMessages().map((m) => m.content))}\n${second.output().slice(-3000)}`,
    });
    expect(discord.resumes()).toHaveLength(1);
    expect(discord.identifies()).toHaveLength(2);
    for (const text of ["first", "missed two"]) expect(posted(text)).toHaveLength(1);
    expect(posted("missed one")).toHaveLength(0);
    const call = model.requests.find((r) =>
      r.messages.some((m) => m.content === "echo: missed two"),
    );
    expect(call?.messages.filter((m) => m.role === "user").map((m) => m.content)).toEqual([
      "echo: first",
      "echo: missed one",
      "echo: missed two",
    ]);
  }, 90_000);
});
