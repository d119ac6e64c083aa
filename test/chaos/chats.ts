/**
 * The chaos harness's users, one driver per platform: a user of a private chat writes a message,
 * and reads what the bot's messages show. Everything else (the gateway, the model, the kills, the
 * checker) is the same on every platform. Chats are numbered as plan.ts numbers them; each driver
 * maps a number to its platform's user and chat, and says which session the gateway keeps for it.
 */
import { setTimeout as sleep } from "node:timers/promises";
import { type FakeMatrix, startFakeMatrix } from "../fakes/matrix-server.js";
import { type FakeTelegram, startFakeTelegram } from "../fakes/telegram-server.js";
import { type FakeWhatsapp, startFakeWhatsapp } from "../fakes/whatsapp-server.js";
import { freePort, type GatewayProcess } from "../helpers/gateway-process.js";

export const CHAOS_PLATFORMS = ["telegram", "whatsapp", "matrix"] as const;
export type ChaosPlatform = (typeof CHAOS_PLATFORMS)[number];

/** A bot message as the chat shows it now (an edited one in its final text). */
export interface ShownMessage {
  text: string;
  edited: boolean;
}

export interface ChaosChats {
  readonly platform: ChaosPlatform;
  /** The gateway's environment for the platform: credentials, API root, allowlist. */
  readonly env: Record<string, string>;
  /** The user of chat `chatId` writes `text`. */
  send(chatId: number, text: string): void;
  /** The bot's messages in chat `chatId`, oldest first. */
  botMessages(chatId: number): ShownMessage[];
  sessionKey(chatId: number): string;
  /**
   * The bot's first start, before anyone writes, where the platform needs one: a new Matrix bot
   * answers nothing said before its first sync.
   */
  introduce?(spawn: () => Promise<GatewayProcess>): Promise<void>;
  close(): Promise<void>;
}

/** The Telegram stand-in itself, for tests that reach past the driver (Telegram chats only). */
export interface TelegramChats extends ChaosChats {
  readonly telegram: FakeTelegram;
}

const TELEGRAM_TOKEN = "123456:chaos-token";

export async function startChats(platform: ChaosPlatform, chats: number[]): Promise<ChaosChats> {
  if (platform === "whatsapp") return whatsappChats(chats);
  if (platform === "matrix") return matrixChats(chats);
  return telegramChats(await startFakeTelegram({ token: TELEGRAM_TOKEN }), TELEGRAM_TOKEN, chats);
}

/** Private chats with the bot: the chat id is the user's id. */
export function telegramChats(
  telegram: FakeTelegram,
  token: string,
  chats: number[],
): TelegramChats {
  return {
    platform: "telegram",
    telegram,
    env: {
      TELEGRAM_BOT_TOKEN: token,
      TELEGRAM_API_ROOT: telegram.apiRoot,
      TELEGRAM_ALLOWED_USERS: chats.join(","),
    },
    send: (chatId, text) => telegram.sendUserMessage({ chatId, text }),
    botMessages: (chatId) =>
      telegram
        .chatLog(chatId)
        .filter((e) => e.from === "bot")
        .map((e) => ({ text: e.text, edited: e.edited })),
    sessionKey: (chatId) => `agent:main:telegram:dm:${chatId}`,
    close: () => telegram.close(),
  };
}

/** How often the stand-in posts again what the gateway did not answer 200 (Meta retries too). */
const WEBHOOK_RETRY_MS = 1000;

/**
 * Users writing to the business number: the webhook goes to a fixed port (Meta knows one URL),
 * and every POST not answered 200 (the gateway was down or died mid-request) is posted again.
 */
async function whatsappChats(chats: number[]): Promise<ChaosChats> {
  const wa: FakeWhatsapp = await startFakeWhatsapp();
  const port = await freePort();
  wa.webhookUrl = `http://127.0.0.1:${port}/platforms/whatsapp/webhook`;
  const retries = setInterval(() => wa.retryUnanswered(), WEBHOOK_RETRY_MS);
  const waId = (chatId: number) => `1555${String(chatId).padStart(7, "0")}`;
  return {
    platform: "whatsapp",
    env: {
      WHATSAPP_PHONE_NUMBER_ID: wa.phoneNumberId,
      WHATSAPP_ACCESS_TOKEN: wa.accessToken,
      WHATSAPP_APP_SECRET: wa.appSecret,
      WHATSAPP_VERIFY_TOKEN: "chaos-verify",
      WHATSAPP_API_ROOT: wa.apiRoot,
      WHATSAPP_ALLOWED_USERS: chats.map(waId).join(","),
      KEEL_HTTP_PORT: String(port),
    },
    send: (chatId, text) => void wa.userSends({ from: waId(chatId), text }),
    // WhatsApp cannot edit: every message stays as it was sent.
    botMessages: (chatId) => wa.botTexts(waId(chatId)).map((text) => ({ text, edited: false })),
    sessionKey: (chatId) => `agent:main:whatsapp:dm:${waId(chatId)}`,
    async close() {
      clearInterval(retries);
      await wa.close();
    },
  };
}

/** Direct rooms (the bot and one user each) on the stand-in homeserver. */
async function matrixChats(chats: number[]): Promise<ChaosChats> {
  const mx: FakeMatrix = await startFakeMatrix();
  const roomId = (chatId: number) => `!chat${chatId}:fake.test`;
  const userId = (chatId: number) => `@user${chatId}:fake.test`;
  for (const chatId of chats) mx.setMembers(roomId(chatId), [mx.userId, userId(chatId)]);
  return {
    platform: "matrix",
    env: {
      MATRIX_HOMESERVER: mx.homeserver,
      MATRIX_USER_ID: mx.userId,
      MATRIX_ACCESS_TOKEN: mx.accessToken,
      MATRIX_ALLOWED_USERS: chats.map(userId).join(","),
    },
    send: (chatId, text) =>
      void mx.userSays({ roomId: roomId(chatId), sender: userId(chatId), body: text }),
    botMessages: (chatId) => mx.botMessages(roomId(chatId)),
    sessionKey: (chatId) => `agent:main:matrix:room:${roomId(chatId)}`,
    async introduce(spawn) {
      const gateway = await spawn();
      try {
        // The second /sync carries the position the first one stored: from now on all is answered.
        const deadline = Date.now() + 20_000;
        while (mx.sinceSeen.length < 2 && Date.now() < deadline) {
          await sleep(50);
        }
        if (mx.sinceSeen.length < 2) throw new Error("the Matrix bot's first sync did not happen");
      } finally {
        await gateway.terminate();
      }
    },
    close: () => mx.close(),
  };
}
