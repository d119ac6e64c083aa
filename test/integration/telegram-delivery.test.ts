import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect } from "vitest";
import { runCliInProcess } from "../helpers/cli-run.js";
import {
  ALLOWED_USER,
  botMessages,
  type TelegramGatewayHarness,
} from "../helpers/in-process-gateway.js";
import { telegramTest } from "../helpers/telegram-test.js";
import { waitFor } from "../helpers/wait-for.js";

const sendCallsTo = (h: TelegramGatewayHarness, chatId: number) =>
  h.telegram.sent.filter(
    (c) => c.method === "sendMessage" && String(c.payload.chat_id) === String(chatId),
  );

describe.concurrent("Telegram access through the real gateway", () => {
  telegramTest(
    "gives an unknown user a pairing code, and answers them once approved",
    async ({ h }) => {
      const gateway = await h.start();
      const stranger = 9001;
      h.telegram.sendUserMessage({ chatId: stranger, text: "echo: let me in" });
      const answer = await waitFor(() => botMessages(h.telegram, stranger)[0]);
      const code = /pairing code is ([A-Z0-9]{8})/.exec(answer.text)?.[1];
      expect(code, answer.text).toBeDefined();
      expect(h.model.requests).toHaveLength(0);

      const approved = await gateway.store.approvePairing(code!);
      expect(approved?.userId).toBe(String(stranger));
      h.telegram.sendUserMessage({ chatId: stranger, text: "echo: thanks" });
      await waitFor(() => botMessages(h.telegram, stranger)[1]);
      expect(botMessages(h.telegram, stranger).map((m) => m.text)).toEqual([answer.text, "thanks"]);
    },
  );

  telegramTest(
    "`keel pairing approve` tells the user they are in, through the running gateway",
    async ({ h }) => {
      await h.start();
      const stranger = 9002;
      h.telegram.sendUserMessage({ chatId: stranger, text: "echo: let me in" });
      const answer = await waitFor(() => botMessages(h.telegram, stranger)[0]);
      const code = /pairing code is ([A-Z0-9]{8})/.exec(answer.text)![1]!;

      const approve = await runCliInProcess(["--home", h.home, "pairing", "approve", code]);
      expect(approve.code).toBe(0);
      // The CLI wrote the notice into state.db; the gateway's outbox sweep delivers it.
      const notice = await waitFor(() => botMessages(h.telegram, stranger)[1], {
        timeoutMs: 15_000,
      });
      expect(notice.text).toMatch(/You're in/);

      const approved = await runCliInProcess(["--home", h.home, "pairing", "list", "--approved"]);
      expect(approved.out.join("\n")).toContain(`telegram  user ${stranger}`);
      const revoke = await runCliInProcess([
        "--home",
        h.home,
        "pairing",
        "revoke",
        String(stranger),
      ]);
      expect(revoke.code).toBe(0);
      h.telegram.sendUserMessage({ chatId: stranger, text: "echo: still here?" });
      const again = await waitFor(() => botMessages(h.telegram, stranger)[2]);
      expect(again.text).toMatch(/pairing code is/);
      expect(h.model.requests).toHaveLength(0);
      expect((await runCliInProcess(["--home", h.home, "pairing", "revoke", "777"])).code).toBe(1);
    },
  );

  telegramTest(
    "an approval made while the gateway is down reaches the user at the next start",
    async ({ h }) => {
      await h.start();
      const stranger = 9003;
      h.telegram.sendUserMessage({ chatId: stranger, text: "echo: hello?" });
      const answer = await waitFor(() => botMessages(h.telegram, stranger)[0]);
      const code = /pairing code is ([A-Z0-9]{8})/.exec(answer.text)![1]!;
      await h.stop();

      expect((await runCliInProcess(["--home", h.home, "pairing", "approve", code])).code).toBe(0);
      await h.start();
      const notice = await waitFor(() => botMessages(h.telegram, stranger)[1]);
      expect(notice.text).toMatch(/You're in/);
    },
  );

  telegramTest(
    "ignores a stranger in a group silently, and answers an allowed user there",
    async ({ h }) => {
      await h.start();
      const group = -100777;
      const stranger = h.telegram.sendUserMessage({
        chatId: group,
        userId: 31337,
        text: "echo: hi",
      });
      await waitFor(() => h.telegram.confirmedOffset() > stranger.update_id, {
        message: "stranger's update consumed",
      });
      h.telegram.sendUserMessage({ chatId: group, userId: ALLOWED_USER, text: "echo: me too" });
      await waitFor(() => botMessages(h.telegram, group)[0]);
      expect(botMessages(h.telegram, group).map((m) => m.text)).toEqual(["me too"]);
      expect(h.model.requests).toHaveLength(1);
    },
  );
});

describe.concurrent("Telegram send failures through the real gateway", () => {
  telegramTest("waits out a 429 retry_after and delivers the reply once", async ({ h }) => {
    await h.start();
    h.telegram.failNext("sendMessage", { error_code: 429, retry_after: 1 });
    h.telegram.sendUserMessage({ chatId: ALLOWED_USER, text: "echo: flood" });
    await waitFor(() => botMessages(h.telegram, ALLOWED_USER)[0], { timeoutMs: 8000 });
    const calls = sendCallsTo(h, ALLOWED_USER);
    expect(calls.map((c) => c.errorCode ?? 200)).toEqual([429, 200]);
    expect(botMessages(h.telegram, ALLOWED_USER).map((m) => m.text)).toEqual(["flood"]);
  });

  telegramTest("retries 5xx answers and delivers the reply once", async ({ h }) => {
    await h.start();
    h.telegram.failNext("sendMessage", { error_code: 502 });
    h.telegram.failNext("sendMessage", { error_code: 500 });
    h.telegram.sendUserMessage({ chatId: ALLOWED_USER, text: "echo: bumpy" });
    await waitFor(() => botMessages(h.telegram, ALLOWED_USER)[0], { timeoutMs: 8000 });
    expect(sendCallsTo(h, ALLOWED_USER).map((c) => c.errorCode ?? 200)).toEqual([502, 500, 200]);
    expect(botMessages(h.telegram, ALLOWED_USER).map((m) => m.text)).toEqual(["bumpy"]);
  });

  telegramTest("retries after a dropped connection and delivers the reply once", async ({ h }) => {
    await h.start();
    h.telegram.dropNextConnection("sendMessage");
    h.telegram.sendUserMessage({ chatId: ALLOWED_USER, text: "echo: dropped" });
    await waitFor(() => botMessages(h.telegram, ALLOWED_USER)[0], { timeoutMs: 8000 });
    expect(sendCallsTo(h, ALLOWED_USER).map((c) => c.ok)).toEqual([false, true]);
    expect(botMessages(h.telegram, ALLOWED_USER).map((m) => m.text)).toEqual(["dropped"]);
  });

  telegramTest(
    "reports a rejected token (401) in gateway_state.json while the API keeps serving",
    async ({ h }) => {
      h.telegram.failNext("getMe", { error_code: 401 });
      const gateway = await h.start({ KEEL_API_ENABLED: "true" });
      await waitFor(() => {
        const platforms = h.runtimeStatus().platforms as Record<string, { state: string }>;
        return platforms?.telegram?.state === "error";
      });
      const telegram = (h.runtimeStatus().platforms as Record<string, Record<string, string>>)
        .telegram!;
      expect(telegram.error).toMatch(/401/);
      expect(telegram.error).toMatch(/token/i);
      const token = readFileSync(join(h.home, "control_token"), "utf8").trim();
      const response = await fetch(`http://127.0.0.1:${gateway.port}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
        body: JSON.stringify({
          model: "keel",
          messages: [{ role: "user", content: "echo: still here" }],
        }),
      });
      expect(response.status).toBe(200);
      const body = (await response.json()) as { choices: { message: { content: string } }[] };
      expect(body.choices[0]!.message.content).toBe("still here");
    },
  );

  telegramTest("reports another poller (409) in gateway_state.json", async ({ h }) => {
    await h.start();
    h.telegram.failNext("getUpdates", { error_code: 409 });
    // Wake the waiting long poll so the next getUpdates call meets the conflict.
    h.telegram.sendUserMessage({ chatId: ALLOWED_USER, text: "echo: before" });
    await waitFor(
      () => {
        const platforms = h.runtimeStatus().platforms as Record<string, Record<string, string>>;
        return platforms?.telegram?.state === "error" ? platforms.telegram : null;
      },
      { message: "409 reported" },
    ).then((telegram) => expect(telegram.error).toMatch(/409|another/i));
  });
});

describe.concurrent("Telegram replies through the outbox", () => {
  telegramTest(
    "sends after the next start a reply that was recorded but not sent when the gateway stopped",
    async ({ h }) => {
      const gateway = await h.start();
      // Telegram never answers this send: the reply is recorded but not confirmed.
      h.telegram.hangNext("sendMessage");
      h.telegram.sendUserMessage({ chatId: ALLOWED_USER, text: "echo: keep me" });
      await waitFor(() => sendCallsTo(h, ALLOWED_USER).length > 0, { message: "send attempted" });
      expect(await gateway.store.listPendingOutbox("telegram")).toHaveLength(1);
      await h.stop();
      expect(botMessages(h.telegram, ALLOWED_USER)).toEqual([]);

      await h.start();
      await waitFor(() => botMessages(h.telegram, ALLOWED_USER)[0], { timeoutMs: 10_000 });
      expect(botMessages(h.telegram, ALLOWED_USER).map((m) => m.text)).toEqual(["keep me"]);
    },
  );
});
