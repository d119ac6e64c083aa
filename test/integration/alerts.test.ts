import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, beforeEach, describe, expect } from "vitest";
import { ALLOWED_USER, botMessages } from "../helpers/in-process-gateway.js";
import { telegramTest } from "../helpers/telegram-test.js";
import { waitFor } from "../helpers/wait-for.js";

interface Posted {
  alert: string;
  state: string;
  detail: string;
  at: string;
}

describe("alerts through the real gateway", () => {
  let posted: Posted[];
  let beats: number;
  let url: string;
  let close: () => Promise<void>;

  beforeEach(async () => {
    posted = [];
    beats = 0;
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        if (req.method === "POST") posted.push(JSON.parse(Buffer.concat(chunks).toString()));
        else beats += 1;
        res.writeHead(204).end();
      });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    close = () => new Promise<void>((resolve) => server.close(() => resolve()));
  });

  afterEach(() => close());

  telegramTest(
    "a model failing every call is raised once to the webhook and the Telegram chat, and cleared once when it answers",
    async ({ h }) => {
      await h.start({
        KEEL_ALERTS_WEBHOOK: `${url}/hook`,
        KEEL_ALERTS_CHAT: `telegram:${ALLOWED_USER}`,
        KEEL_ALERTS_AFTER: "0.5",
        KEEL_ALERTS_HEARTBEAT_URL: `${url}/beat`,
        KEEL_ALERTS_HEARTBEAT_EVERY: "0.5",
      });
      await waitFor(() => beats > 0, { message: "heartbeat while healthy" });
      const model = () => posted.filter((p) => p.alert === "model_failing");
      h.model.failNext(401);
      h.telegram.sendUserMessage({ chatId: ALLOWED_USER, text: "echo: are you there" });
      await waitFor(() => model().length === 1, { message: "raised", timeoutMs: 10_000 });
      expect(model()[0]).toMatchObject({ state: "raised", detail: expect.stringMatching(/401/) });
      const alertTexts = () =>
        botMessages(h.telegram, ALLOWED_USER)
          .map((m) => m.text)
          .filter((t) => t.includes("model_failing"));
      await waitFor(() => alertTexts().length === 1, { message: "told in the chat" });
      expect(alertTexts()[0]).toMatch(/^⚠️ Alert: model_failing/);

      h.telegram.sendUserMessage({ chatId: ALLOWED_USER, text: "echo: back again" });
      await waitFor(() => model().length === 2, { message: "cleared", timeoutMs: 10_000 });
      await waitFor(() => alertTexts().length === 2, { message: "cleared in the chat" });
      expect(model().map((p) => p.state)).toEqual(["raised", "cleared"]);
      expect(alertTexts()[1]).toMatch(/^✅ Resolved: model_failing/);
    },
  );
});
