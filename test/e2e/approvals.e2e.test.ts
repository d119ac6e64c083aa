/**
 * Approvals end to end: the real gateway process, the stand-in Telegram Bot API and model. A
 * dangerous command waits for a button; the ledger file in the workspace counts how often it
 * really ran.
 */
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { type FakeOpenAI, startFakeOpenAI } from "../fakes/openai-server.js";
import {
  type ChatLogEntry,
  type FakeTelegram,
  startFakeTelegram,
} from "../fakes/telegram-server.js";
import {
  bootedPids,
  freePort,
  type GatewayProcess,
  runKeel,
  startGatewayProcess,
} from "../helpers/gateway-process.js";
import { createTempDir } from "../helpers/temp-home.js";
import { waitFor } from "../helpers/wait-for.js";

const TOKEN = "123456:E2E-approvals";
const USER = 4242;
const STRANGER = 5151;
/** A second allowed user with a private chat of their own. */
const OTHER = 6262;
const GROUP = -100777;
/** `platforms.api.key`: a /v1 credential other than the control token. */
const API_KEY = "approvals-e2e-api-key-0123";
/** Dangerous (a recursive delete), and it leaves one line in the ledger each time it runs. */
const COMMAND = "rm -rf scratch && echo ran >> ledger.txt";

describe("approvals (real process, stand-in Telegram)", () => {
  let home: ReturnType<typeof createTempDir>;
  let telegram: FakeTelegram;
  let model: FakeOpenAI;
  let port: number;
  const spawned: GatewayProcess[] = [];

  beforeEach(async () => {
    home = createTempDir("keel-approvals-e2e-");
    telegram = await startFakeTelegram({ token: TOKEN });
    model = await startFakeOpenAI();
    port = await freePort();
  });

  afterEach(async () => {
    for (const gateway of spawned.splice(0)) await gateway.stop();
    await telegram.close();
    await model.close();
    home.cleanup();
  });

  async function start(): Promise<GatewayProcess> {
    const gateway = await startGatewayProcess({
      home: home.path,
      env: {
        TELEGRAM_BOT_TOKEN: TOKEN,
        TELEGRAM_API_ROOT: telegram.apiRoot,
        TELEGRAM_ALLOWED_USERS: `${USER},${OTHER}`,
        OPENAI_BASE_URL: model.baseUrl,
        KEEL_MODEL: "fake-model",
        KEEL_HTTP_PORT: String(port),
        KEEL_API_KEY: API_KEY,
      },
    });
    spawned.push(gateway);
    const boots = bootedPids(home.path).length;
    await waitFor(() => bootedPids(home.path).length > boots, {
      timeoutMs: 20_000,
      message: `gateway running\n${gateway.output().slice(-2000)}`,
    });
    return gateway;
  }

  const cliEnv = () => ({ KEEL_HTTP_PORT: String(port) });
  const ledger = () => join(home.path, "workspace", "ledger.txt");
  const runs = () =>
    existsSync(ledger()) ? readFileSync(ledger(), "utf8").split("\n").filter(Boolean).length : 0;
  /** Messages sent with approval buttons (edits that remove buttons do not change this). */
  const cardsSent = () =>
    telegram.sent.filter((c) => c.ok && c.method === "sendMessage" && c.payload.reply_markup)
      .length;
  const botLog = (chatId: number) => telegram.chatLog(chatId).filter((e) => e.from === "bot");
  const texts = (chatId: number) => botLog(chatId).map((e) => e.text);

  /** Waits for the n-th approval card in the chat (a bot message sent with approve buttons). */
  async function card(chatId: number, n = 1): Promise<{ entry: ChatLogEntry; id: string }> {
    const cards = () => botLog(chatId).filter((e) => e.sentButtons?.length);
    await waitFor(() => cards().length >= n, {
      timeoutMs: 20_000,
      message: `approval card ${n}; chat: ${JSON.stringify(texts(chatId))}`,
    });
    const entry = cards()[n - 1]!;
    const data = entry.sentButtons!.flat().map((b) => b.callback_data ?? "");
    const id = data.find((d) => d.startsWith("approve:"))!.slice("approve:".length);
    expect(data).toEqual([`approve:${id}`, `approve_session:${id}`, `deny:${id}`]);
    return { entry, id };
  }

  const reply = (chatId: number, prefix: string) =>
    waitFor(() => texts(chatId).some((t) => t.startsWith(prefix)), {
      timeoutMs: 20_000,
      message: `reply starting "${prefix}"; chat: ${JSON.stringify(texts(chatId))}`,
    });

  it("a button press runs the command once and the card says who decided", async () => {
    await start();
    telegram.sendUserMessage({ chatId: USER, text: `run: ${COMMAND}`, firstName: "Ada" });
    const { entry, id } = await card(USER);
    expect(entry.text).toContain(COMMAND);
    expect(entry.text).toContain(`/approve ${id}`);
    expect(runs()).toBe(0);

    const press = telegram.pressButton({
      chatId: USER,
      messageId: entry.messageId,
      userId: USER,
      data: `approve:${id}`,
      firstName: "Ada",
    });
    await reply(USER, "ran: ");
    expect(runs()).toBe(1);
    await waitFor(() => telegram.callbackAnswers().has(press.callback_query_id));
    const edited = botLog(USER).find((e) => e.messageId === entry.messageId)!;
    expect(edited.text).toContain("Approved once by Ada");
    expect(edited.buttons).toBeUndefined();
  });

  it("a waiting call holds no concurrency slot: with one slot, another chat is still answered", async () => {
    writeFileSync(join(home.path, "config.yaml"), "agent:\n  max_concurrent_turns: 1\n");
    await start();
    telegram.sendUserMessage({ chatId: USER, text: `run: ${COMMAND}` });
    await card(USER);
    telegram.sendUserMessage({ chatId: OTHER, text: "echo: not blocked" });
    await reply(OTHER, "not blocked");
    expect(runs()).toBe(0);
  });

  it("after a tool line was shown, the question still comes as a card with buttons", async () => {
    await start();
    model.script((request) => {
      const answered = request.messages.some((m) => m.role === "tool");
      if (answered) return { text: "both done" };
      return {
        toolCalls: [
          { name: "terminal", arguments: { command: "echo first >> before.txt" } },
          { name: "terminal", arguments: { command: COMMAND } },
        ],
      };
    });
    telegram.sendUserMessage({ chatId: USER, text: "two steps" });
    const { entry, id } = await card(USER);
    expect(entry.text).toContain(COMMAND);
    expect(existsSync(join(home.path, "workspace", "before.txt"))).toBe(true);
    telegram.pressButton({
      chatId: USER,
      messageId: entry.messageId,
      userId: USER,
      data: `approve:${id}`,
    });
    await reply(USER, "both done");
    expect(runs()).toBe(1);
  });

  it("deny: nothing runs and the model is told", async () => {
    await start();
    telegram.sendUserMessage({ chatId: USER, text: `run: ${COMMAND}` });
    const { entry, id } = await card(USER);
    telegram.pressButton({
      chatId: USER,
      messageId: entry.messageId,
      userId: USER,
      data: `deny:${id}`,
    });
    await reply(USER, "ran: Not run:");
    expect(texts(USER).find((t) => t.startsWith("ran: "))).toContain("denied this call");
    expect(runs()).toBe(0);
  });

  it("a new message instead of an answer: the card says so and loses its buttons, nothing runs", async () => {
    await start();
    telegram.sendUserMessage({ chatId: USER, text: `run: ${COMMAND}` });
    const { entry } = await card(USER);
    telegram.sendUserMessage({ chatId: USER, text: "never mind" });
    await waitFor(
      () =>
        botLog(USER)
          .find((e) => e.messageId === entry.messageId)
          ?.text.includes("a new message came first"),
      { timeoutMs: 20_000, message: `card superseded; chat: ${JSON.stringify(texts(USER))}` },
    );
    expect(botLog(USER).find((e) => e.messageId === entry.messageId)?.buttons ?? []).toEqual([]);
    // The model saw the call as not run (its next answer quotes the tool result it got).
    const requests = () => JSON.stringify(model.requests.map((r) => r.messages));
    await waitFor(() => requests().includes("the user sent a new message instead of approving"), {
      timeoutMs: 20_000,
      message: "the model told the call was not run",
    });
    await sleep(500);
    expect(runs()).toBe(0);
  });

  it("a stranger's press in a group is refused; the asker's own press then runs it", async () => {
    await start();
    telegram.sendUserMessage({ chatId: GROUP, userId: USER, text: `run: ${COMMAND}` });
    const { entry, id } = await card(GROUP);
    const stranger = telegram.pressButton({
      chatId: GROUP,
      messageId: entry.messageId,
      userId: STRANGER,
      data: `approve:${id}`,
    });
    await waitFor(() => telegram.callbackAnswers().has(stranger.callback_query_id));
    expect(telegram.callbackAnswers().get(stranger.callback_query_id)).toMatch(/Only the person/);
    expect(runs()).toBe(0);
    expect(botLog(GROUP).find((e) => e.messageId === entry.messageId)!.buttons).toBeDefined();

    telegram.pressButton({
      chatId: GROUP,
      messageId: entry.messageId,
      userId: USER,
      data: `approve:${id}`,
    });
    await reply(GROUP, "ran: ");
    expect(runs()).toBe(1);
  });

  it("no answer within tools.approval_timeout: denied with a notice, the model is told", async () => {
    writeFileSync(join(home.path, "config.yaml"), "tools:\n  approval_timeout: 2\n");
    await start();
    telegram.sendUserMessage({ chatId: USER, text: `run: ${COMMAND}` });
    const { entry } = await card(USER);
    await reply(USER, "⌛ Timed out: not run");
    await reply(USER, "ran: Not run: nobody approved");
    expect(runs()).toBe(0);
    const edited = botLog(USER).find((e) => e.messageId === entry.messageId)!;
    expect(edited.text).toMatch(/^⌛ Timed out: not run/);
    expect(edited.buttons).toBeUndefined();
  });

  it("SIGKILL while waiting: asked again after the restart, the old button still works, runs exactly once", async () => {
    const first = await start();
    telegram.sendUserMessage({ chatId: USER, text: `run: ${COMMAND}` });
    const { entry, id } = await card(USER);
    first.kill("SIGKILL");
    await first.waitForExit(10_000);

    const second = await start();
    // Asked again, not run, not forgotten. (The first card may also come twice: a SIGKILL
    // between sending it and recording it as delivered is the outbox's one accepted duplicate.)
    await waitFor(
      () => botLog(USER).some((e) => e.text.includes("Still waiting after a gateway restart")),
      {
        timeoutMs: 20_000,
        message: `asked again; chat: ${JSON.stringify(texts(USER))}`,
      },
    );
    const asked = botLog(USER).find((e) =>
      e.text.includes("Still waiting after a gateway restart"),
    )!;
    expect(asked.buttons!.flat().map((b) => b.callback_data)).toContain(`approve:${id}`);
    const again = { entry: asked };
    expect(runs()).toBe(0);
    const pending = (await (await second.control("/api/approvals")).json()) as {
      approvals: { id: string }[];
    };
    expect(pending.approvals.map((a: { id: string }) => a.id)).toEqual([id]);

    telegram.pressButton({
      chatId: USER,
      messageId: entry.messageId,
      userId: USER,
      data: `approve:${id}`,
    });
    await reply(USER, "ran: ");
    expect(runs()).toBe(1);

    // The second card's button is answered, and changes nothing.
    const late = telegram.pressButton({
      chatId: USER,
      messageId: again.entry.messageId,
      userId: USER,
      data: `approve:${id}`,
    });
    await waitFor(() => telegram.callbackAnswers().has(late.callback_query_id));
    expect(telegram.callbackAnswers().get(late.callback_query_id)).toBe("Already answered.");

    // A restart after the answer neither asks nor runs it again.
    second.kill("SIGKILL");
    await second.waitForExit(10_000);
    const cards = cardsSent();
    const third = await start();
    await third.waitForReady();
    telegram.sendUserMessage({ chatId: USER, text: "echo: still here" });
    await reply(USER, "still here");
    expect(runs()).toBe(1);
    expect(texts(USER).filter((t) => t.startsWith("ran: "))).toHaveLength(1);
    expect(cardsSent()).toBe(cards);
  });

  it("the control API and the CLI list and answer approvals", async () => {
    const gateway = await start();
    telegram.sendUserMessage({ chatId: USER, text: `run: ${COMMAND}` });
    const { id } = await card(USER);
    const listed = await runKeel({ home: home.path, args: ["approvals", "list"], env: cliEnv() });
    expect(listed.stdout).toContain(id);

    const bad = await gateway.control(`/api/approvals/${id}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ decision: "maybe" }),
    });
    expect(bad.status).toBe(400);
    expect((await gateway.fetch("/api/approvals")).status).toBe(401);

    const approved = await runKeel({
      home: home.path,
      args: ["approvals", "approve", id],
      env: cliEnv(),
    });
    expect(approved.code, approved.stderr).toBe(0);
    await reply(USER, "ran: ");
    expect(texts(USER).some((t) => t.startsWith("✅ Approved once by an operator"))).toBe(true);
    const again = await gateway.control(`/api/approvals/${id}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ decision: "deny" }),
    });
    expect(again.status).toBe(409);
    expect(await again.json()).toEqual({
      error: {
        code: "APPROVAL_ANSWERED",
        message: `Approval ${id} was already answered: approve by an operator.`,
      },
    });
    expect(runs()).toBe(1);
  });

  it("/approve in the chat; approve_session lets the same command run without asking", async () => {
    await start();
    telegram.sendUserMessage({ chatId: USER, text: `run: ${COMMAND}` });
    await card(USER, 1);
    telegram.sendUserMessage({ chatId: USER, text: "/approve" });
    await reply(USER, "✅ Approved once");
    await waitFor(() => runs() === 1, { timeoutMs: 20_000, message: "first run" });

    // Approved once is not a grant: the next recursive delete asks again.
    telegram.sendUserMessage({ chatId: USER, text: `run: ${COMMAND}` });
    const second = await card(USER, 2);
    telegram.sendUserMessage({ chatId: USER, text: `/approve ${second.id} session` });
    await reply(USER, "✅ Approved for this session");
    await waitFor(() => runs() === 2, { timeoutMs: 20_000, message: "second run" });

    telegram.sendUserMessage({ chatId: USER, text: `run: ${COMMAND}` });
    await waitFor(() => runs() === 3, { timeoutMs: 20_000, message: "third run, not asked" });
    expect(cardsSent()).toBe(2);
    // Answered by a typed command, the cards still show who decided what, without buttons.
    const [first, secondCard] = botLog(USER).filter((e) => e.sentButtons?.length);
    expect(first!.text).toMatch(/^✅ Approved once by Tester/);
    expect(secondCard!.text).toMatch(/^✅ Approved for this session by Tester/);
    expect(botLog(USER).filter(hasButtons)).toEqual([]);
    telegram.sendUserMessage({ chatId: USER, text: "/deny" });
    await reply(USER, "Nothing is waiting for approval here.");
  });

  it("approve_session is personal: another person in the same group is asked again", async () => {
    await start();
    telegram.sendUserMessage({ chatId: GROUP, userId: USER, text: `run: ${COMMAND}` });
    const first = await card(GROUP, 1);
    telegram.pressButton({
      chatId: GROUP,
      messageId: first.entry.messageId,
      userId: USER,
      data: `approve_session:${first.id}`,
    });
    await waitFor(() => runs() === 1, { timeoutMs: 20_000, message: "first run" });

    // Same session, same command, another person: their own question, nothing runs.
    telegram.sendUserMessage({ chatId: GROUP, userId: OTHER, text: `run: ${COMMAND}` });
    const second = await card(GROUP, 2);
    expect(second.id).not.toBe(first.id);
    expect(runs()).toBe(1);
    telegram.sendUserMessage({ chatId: GROUP, userId: OTHER, text: `/deny ${second.id}` });
    await reply(GROUP, "🚫 Denied");

    // The one who was granted it runs it unasked.
    telegram.sendUserMessage({ chatId: GROUP, userId: USER, text: `run: ${COMMAND}` });
    await waitFor(() => runs() === 2, { timeoutMs: 20_000, message: "granted run" });
    expect(cardsSent()).toBe(2);
  });

  it("the card shows both halves of a padded command; show and GET give it whole", async () => {
    const gateway = await start();
    const padded = `rm -rf ./build${" ".repeat(640)}; rm -rf /srv/precious && echo ran >> ledger.txt`;
    telegram.sendUserMessage({ chatId: USER, text: `run: ${padded}` });
    const { entry, id } = await card(USER);
    expect(entry.text).toContain("rm -rf ./build⟨640 spaces⟩; rm -rf /srv/precious");

    const long = `echo start ${"y".repeat(6000)} ; rm -rf /srv/precious`;
    telegram.sendUserMessage({ chatId: USER, text: `run: ${long}` });
    const second = await card(USER, 2);
    expect(second.entry.text).toContain("echo start yyy");
    expect(second.entry.text).toContain("yyy ; rm -rf /srv/precious");
    // The card says an operator sees it whole; the operator's tools show it (below).
    expect(second.entry.text).toContain(`an operator sees the whole command [${second.id}]`);

    const shown = await runKeel({
      home: home.path,
      args: ["approvals", "show", id],
      env: cliEnv(),
    });
    expect(shown.code, shown.stderr).toBe(0);
    expect(shown.stdout).toContain(
      "rm -rf ./build⟨640 spaces⟩; rm -rf /srv/precious && echo ran >> ledger.txt",
    );
    const json = await runKeel({
      home: home.path,
      args: ["approvals", "show", second.id, "--json"],
      env: cliEnv(),
    });
    expect((JSON.parse(json.stdout) as { summary: string }).summary).toBe(long);
    const byApi = await gateway.control(`/api/approvals/${second.id}`);
    expect(((await byApi.json()) as { approval: { summary: string } }).approval.summary).toBe(long);
    expect((await gateway.fetch(`/api/approvals/${id}`)).status).toBe(401);
    expect((await gateway.control("/api/approvals/nope")).status).toBe(404);
    const missing = await runKeel({
      home: home.path,
      args: ["approvals", "show", "nope"],
      env: cliEnv(),
    });
    expect(missing.code).toBe(1);
    expect(runs()).toBe(0);
  });

  it("keel approvals approve while the gateway is down: the next start runs it once", async () => {
    const first = await start();
    telegram.sendUserMessage({ chatId: USER, text: `run: ${COMMAND}` });
    const { id } = await card(USER);
    first.kill("SIGKILL");
    await first.waitForExit(10_000);
    const approved = await runKeel({
      home: home.path,
      args: ["approvals", "approve", id],
      env: cliEnv(),
    });
    expect(approved.code, approved.stderr).toBe(0);
    expect(approved.stdout).toContain("next start continues the turn");
    expect(runs()).toBe(0);
    const second = await start();
    await reply(USER, "ran: ");
    expect(runs()).toBe(1);
    // One answer: the turn that applied the decision is not followed by a second one.
    telegram.sendUserMessage({ chatId: USER, text: "echo: after" });
    await reply(USER, "after");
    expect(texts(USER).filter((t) => t.startsWith("ran: "))).toHaveLength(1);
    expect(second.output()).not.toMatch(/"level":50/);
    // Decided before the start: not asked again.
    expect(texts(USER).some((t) => t.includes("Still waiting"))).toBe(false);
  });

  it("an API client's request waits for the approval and answers with the turn that follows it", async () => {
    const gateway = await start();
    const response = gateway.control("/v1/chat/completions", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        model: "fake-model",
        messages: [{ role: "user", content: `run: ${COMMAND}` }],
      }),
    });
    const id = await pendingId(gateway);
    expect(runs()).toBe(0);
    const approve = await gateway.control(`/api/approvals/${id}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ decision: "approve" }),
    });
    expect(approve.status).toBe(200);
    const answered = await response;
    expect(answered.status).toBe(200);
    const body = (await answered.json()) as { choices: { message: { content: string } }[] };
    expect(body.choices[0]!.message.content).toMatch(/^ran: /);
    expect(runs()).toBe(1);
  });

  it("approve_session is per /v1 credential: the control token in the same session asks again", async () => {
    const gateway = await start();
    const ask = async (authorization: string, sessionId?: string) => {
      const response = await gateway.fetch("/v1/chat/completions", {
        method: "POST",
        headers: {
          "content-type": "application/json",
          authorization,
          ...(sessionId && { "x-session-id": sessionId }),
        },
        body: JSON.stringify({
          model: "fake-model",
          messages: [{ role: "user", content: `run: ${COMMAND}` }],
        }),
      });
      expect(response.status).toBe(200);
      const body = (await response.json()) as { choices: { message: { content: string } }[] };
      return {
        text: body.choices[0]!.message.content,
        session: response.headers.get("x-session-id")!,
      };
    };
    const answer = async (id: string, decision: string) => {
      const res = await gateway.control(`/api/approvals/${id}`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ decision }),
      });
      expect(res.status).toBe(200);
    };
    const firstAsk = ask(`Bearer ${API_KEY}`);
    await answer(await pendingId(gateway), "approve_session");
    const first = await firstAsk;
    expect(first.text).toMatch(/^ran: /);
    expect(runs()).toBe(1);

    // The same credential in the same session: granted, runs unasked.
    const again = await ask(`Bearer ${API_KEY}`, first.session);
    expect(again.text).toMatch(/^ran: /);
    expect(runs()).toBe(2);
    // Another credential (the control token) in that session: asked again, nothing runs.
    const otherAsk = ask(`Bearer ${gateway.controlToken}`, first.session);
    await answer(await pendingId(gateway), "deny");
    expect((await otherAsk).text).toMatch(/Not run: .* denied this call/);
    expect(runs()).toBe(2);
  });
});

/** The id of the one approval that waits, once one does. */
async function pendingId(gateway: GatewayProcess): Promise<string> {
  let id: string | undefined;
  await waitFor(
    async () => {
      const res = await gateway.control("/api/approvals");
      id = ((await res.json()) as { approvals: { id: string }[] }).approvals[0]?.id;
      return id !== undefined;
    },
    { timeoutMs: 20_000, message: "a pending approval" },
  );
  return id!;
}

function hasButtons(entry: ChatLogEntry): boolean {
  return (entry.buttons?.length ?? 0) > 0;
}
