/**
 * Three real gateway processes on one Postgres database and one Telegram bot (the stand-in
 * server): one of them holds the bot's poller lease and polls; when it is SIGKILLed another takes
 * the poller over within the lease TTL and goes on from the confirmed offset, and a survivor
 * resumes what the dead one was running and runs what it had queued. What the users saw (the
 * stand-in's chat logs), what the model was asked and what the database holds say that nothing
 * was lost and nothing was answered twice.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { type FakeOpenAI, startFakeOpenAI } from "../fakes/openai-server.js";
import { type FakeTelegram, startFakeTelegram } from "../fakes/telegram-server.js";
import { type GatewayProcess, startGatewayProcess } from "../helpers/gateway-process.js";
import { adminQuery, createTestSchema, TEST_PG_URL } from "../helpers/store-harness.js";
import { waitFor } from "../helpers/wait-for.js";

const TOKEN = "123456:cluster-token";
const USERS = [5101, 5102, 5103];
const IDS = ["gw-a", "gw-b", "gw-c"];
/** Seconds: short, so that a takeover happens within the test's bounded waits. */
const LEASE_TTL = 2;

describe.skipIf(process.env.KEEL_TEST_PG === "skip")("three gateways on one Postgres", () => {
  let telegram: FakeTelegram;
  let model: FakeOpenAI;
  let schema: Awaited<ReturnType<typeof createTestSchema>>;
  let gateways: Map<string, GatewayProcess>;

  beforeEach(async () => {
    telegram = await startFakeTelegram({ token: TOKEN });
    model = await startFakeOpenAI();
    schema = await createTestSchema();
    const url = `${TEST_PG_URL}?options=${encodeURIComponent(`-c search_path=${schema.schema}`)}`;
    gateways = new Map();
    // One at a time: concurrent first starts would race on the migrations' advisory lock anyway.
    for (const id of IDS) {
      const gateway = await startGatewayProcess({
        env: {
          KEEL_DATABASE_URL: url,
          KEEL_INSTANCE_ID: id,
          KEEL_LEASE_TTL: String(LEASE_TTL),
          TELEGRAM_BOT_TOKEN: TOKEN,
          TELEGRAM_API_ROOT: telegram.apiRoot,
          TELEGRAM_ALLOWED_USERS: USERS.join(","),
          OPENAI_BASE_URL: model.baseUrl,
          KEEL_MODEL: "fake-model",
          // A message sent while its chat's turn runs waits in the inbox behind it.
          KEEL_GATEWAY_BUSY_INPUT_MODE: "queue",
        },
      });
      gateways.set(id, gateway);
      await gateway.waitForReady(20_000);
    }
  });
  afterEach(async () => {
    await Promise.all([...gateways.values()].map((g) => g.stop()));
    await telegram.close();
    await model.close();
    await schema.drop();
  });

  const q = (sql: string) => adminQuery(`SET search_path TO ${schema.schema}; ${sql}`);

  /** The gateway holding a live poller lease (other than `not`), and its fence. */
  async function pollerHolder(not?: string): Promise<{ owner: string; fence: number }> {
    return waitFor(
      async () => {
        const rows = await q(
          `SELECT owner, fence FROM session_leases WHERE session_key LIKE 'poller:telegram:%'
             AND expires_at > (extract(epoch FROM clock_timestamp()) * 1000)::bigint`,
        );
        return rows.length === 1 && rows[0]!.owner !== not
          ? { owner: String(rows[0]!.owner), fence: Number(rows[0]!.fence) }
          : null;
      },
      {
        timeoutMs: 20_000,
        message: `one gateway${not ? ` other than ${not}` : ""} holds the poller`,
      },
    );
  }

  const botTexts = (chatId: number) =>
    telegram
      .chatLog(chatId)
      .filter((e) => e.from === "bot")
      .map((e) => e.text);

  /** How many model requests answered a user message with this text. */
  const asked = (text: string) =>
    model.requests.filter((r) => {
      const last = r.messages.findLast((m) => m.role === "user");
      return last?.content === text;
    }).length;

  async function kill(id: string): Promise<void> {
    const gateway = gateways.get(id)!;
    gateway.kill("SIGKILL");
    await gateway.waitForExit();
  }

  it("SIGKILL of the poller's holder: another gateway polls on, nothing lost, nothing answered twice", async () => {
    const first = await pollerHolder();
    // Only the holder polls: the standbys never called getUpdates, so Telegram saw no 409.
    for (const [index, user] of USERS.entries()) {
      telegram.sendUserMessage({ chatId: user, text: `echo: before-${index}` });
    }
    for (const [index, user] of USERS.entries()) {
      await waitFor(() => botTexts(user).includes(`before-${index}`), {
        timeoutMs: 15_000,
        message: `reply before-${index}`,
      });
    }

    // Killed after the replies are marked delivered: a kill between Telegram's confirmation and
    // the mark is the one documented duplicate window, not what this test is about.
    await waitFor(
      async () => (await q("SELECT id FROM outbox WHERE state <> 'delivered'")).length === 0,
      { timeoutMs: 10_000, message: "the first replies marked delivered" },
    );
    await kill(first.owner);
    // Sent while nobody polls: they wait at Telegram for the next holder.
    for (const [index, user] of USERS.entries()) {
      telegram.sendUserMessage({ chatId: user, text: `echo: after-${index}` });
    }
    // Its lease runs out (no renewal) and a standby claims it: a new owner, a higher fence.
    const next = await pollerHolder(first.owner);
    expect(next.fence).toBeGreaterThan(first.fence);
    for (const [index, user] of USERS.entries()) {
      await waitFor(() => botTexts(user).includes(`after-${index}`), {
        timeoutMs: 20_000,
        message: `reply after-${index}; chat: ${JSON.stringify(botTexts(user))}`,
      });
    }

    for (const [index, user] of USERS.entries()) {
      expect(botTexts(user)).toEqual([`before-${index}`, `after-${index}`]);
      expect(asked(`echo: before-${index}`)).toBe(1);
      expect(asked(`echo: after-${index}`)).toBe(1);
    }
    expect(telegram.sent.filter((c) => c.method === "getUpdates" && !c.ok)).toEqual([]);
    const inbox = await q("SELECT state, count(*)::int AS n FROM inbox GROUP BY state");
    expect(inbox).toEqual([{ state: "done", n: 6 }]);
    expect(await q("SELECT id FROM outbox WHERE state <> 'delivered'")).toEqual([]);
    expect(gateways.get(next.owner)!.output()).toContain("telegram poller taken");
  });

  it("SIGKILL mid-turn: a survivor resumes the session once, never re-runs the tool, and runs what was queued", async () => {
    const holder = await pollerHolder();
    const user = USERS[0]!;
    telegram.sendUserMessage({ chatId: user, text: "run: sleep 30 && echo never" });
    await waitFor(
      async () => (await q("SELECT 1 FROM tool_calls WHERE state = 'started'")).length > 0,
      { timeoutMs: 15_000, message: "the holder's tool call started" },
    );
    // Queued behind the running turn, in the holder's inbox: never started before the kill.
    telegram.sendUserMessage({ chatId: user, text: "echo: queued-behind" });
    await waitFor(
      async () =>
        (
          await q(
            `SELECT 1 FROM inbox WHERE text = 'echo: queued-behind' AND state = 'pending'
               AND accepted_by = '${holder.owner}'`,
          )
        ).length > 0,
      { timeoutMs: 15_000, message: "the second message stored by the holder" },
    );

    await kill(holder.owner);

    await waitFor(() => botTexts(user).includes("queued-behind"), {
      timeoutMs: 30_000,
      message: `the queued message answered; chat: ${JSON.stringify(botTexts(user))}`,
    });
    const resumed = await waitFor(
      async () => {
        const rows = await q("SELECT id FROM turns WHERE inbox_id IS NULL AND state = 'done'");
        return rows.length > 0 ? rows : null;
      },
      { timeoutMs: 20_000, message: "the cut-off turn resumed" },
    );
    expect(resumed).toHaveLength(1);
    // The tool call is journaled once, with an unknown outcome: it never ran again.
    expect(await q("SELECT state, result FROM tool_calls")).toEqual([
      { state: "finished", result: expect.stringContaining("outcome is unknown") },
    ]);
    const texts = botTexts(user);
    expect(texts.filter((t) => t === "queued-behind")).toHaveLength(1);
    expect(texts.filter((t) => t.startsWith("ran: "))).toHaveLength(1);
    // The resumed answer comes before the queued message's.
    expect(texts.findIndex((t) => t.startsWith("ran: "))).toBeLessThan(
      texts.indexOf("queued-behind"),
    );
    expect(asked("echo: queued-behind")).toBe(1);
    expect(await q("SELECT id, state FROM inbox WHERE state <> 'done'")).toEqual([]);
    const survivors = IDS.filter((id) => id !== holder.owner);
    const took = survivors.filter((id) =>
      gateways.get(id)!.output().includes("running the messages queued by a gateway"),
    );
    expect(took).toHaveLength(1);
  });
});
