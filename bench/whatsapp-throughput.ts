/**
 * Messages per second through the WhatsApp Cloud API adapter: the built gateway (a child process)
 * receiving the stand-in's signed webhook POSTs and answering through its Graph API, with a model
 * that answers "ok" at once. Each user writes again once the previous message is answered, so the
 * latency is webhook POST -> reply `/messages` call (including the inbox commit before the 200,
 * the read receipt and the turn).
 */
import { startFakeWhatsapp } from "../test/fakes/whatsapp-server.js";
import { freePort } from "../test/helpers/gateway-process.js";
import {
  closedLoop,
  type ThroughputOptions,
  type ThroughputResult,
  withBenchGateway,
} from "./throughput.js";

export async function runWhatsappThroughput(options: ThroughputOptions): Promise<ThroughputResult> {
  const wa = await startFakeWhatsapp();
  const port = await freePort();
  wa.webhookUrl = `http://127.0.0.1:${port}/platforms/whatsapp/webhook`;
  const users = Array.from({ length: options.chats }, (_, i) => String(15_550_000_000 + i));
  return withBenchGateway(
    options,
    {
      env: {
        WHATSAPP_PHONE_NUMBER_ID: wa.phoneNumberId,
        WHATSAPP_ACCESS_TOKEN: wa.accessToken,
        WHATSAPP_APP_SECRET: wa.appSecret,
        WHATSAPP_VERIFY_TOKEN: "bench-verify",
        WHATSAPP_API_ROOT: wa.apiRoot,
        WHATSAPP_ALLOWED_USERS: users.join(","),
      },
      port,
      close: () => wa.close(),
    },
    (messages, gatewayRssMb) =>
      closedLoop({
        messages,
        timeoutMs: options.timeoutMs,
        chats: users,
        write: (from, text) => wa.userSends({ from, text }),
        // A reply is a text message to the user (not the read receipt or typing signal).
        onReply: (replied) =>
          wa.onCall((call) => {
            const body = call.body as { to?: string; type?: string };
            if (call.status === 200 && call.path.endsWith("/messages") && body.type === "text") {
              replied(String(body.to));
            }
          }),
        gatewayRssMb,
      }),
  );
}
