/**
 * WhatsApp end to end: the built gateway process against the stand-in Graph API and webhook
 * sender and the fake model, killed with SIGKILL while webhook POSTs are in flight. The stand-in
 * retries, as Meta does, every POST that was not answered 200.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { defaultScript, type FakeOpenAI, startFakeOpenAI } from "../fakes/openai-server.js";
import { type FakeWhatsapp, startFakeWhatsapp } from "../fakes/whatsapp-server.js";
import {
  bootedPids,
  freePort,
  type GatewayProcess,
  startGatewayProcess,
} from "../helpers/gateway-process.js";
import { createTempDir } from "../helpers/temp-home.js";
import { waitFor } from "../helpers/wait-for.js";

const USERS = ["15550000001", "15550000002", "15550000003"];
/** Users whose messages arrive in a burst right before the kill. */
const BURST = ["15550000101", "15550000102", "15550000103", "15550000104", "15550000105"];

describe("WhatsApp with the real gateway process", () => {
  let home: ReturnType<typeof createTempDir>;
  let wa: FakeWhatsapp;
  let model: FakeOpenAI;
  let port: number;
  const spawned: GatewayProcess[] = [];

  beforeEach(async () => {
    home = createTempDir("keel-whatsapp-e2e-");
    wa = await startFakeWhatsapp();
    model = await startFakeOpenAI();
    port = await freePort();
    wa.webhookUrl = `http://127.0.0.1:${port}/platforms/whatsapp/webhook`;
  });

  afterEach(async () => {
    for (const gateway of spawned.splice(0)) await gateway.stop();
    await wa.close();
    await model.close();
    home.cleanup();
  });

  async function start(extra: Record<string, string> = {}): Promise<GatewayProcess> {
    const gateway = await startGatewayProcess({
      home: home.path,
      env: {
        WHATSAPP_PHONE_NUMBER_ID: wa.phoneNumberId,
        WHATSAPP_ACCESS_TOKEN: wa.accessToken,
        WHATSAPP_APP_SECRET: wa.appSecret,
        WHATSAPP_VERIFY_TOKEN: "e2e-verify",
        WHATSAPP_API_ROOT: wa.apiRoot,
        WHATSAPP_ALLOWED_USERS: [...USERS, ...BURST].join(","),
        OPENAI_BASE_URL: model.baseUrl,
        KEEL_MODEL: "fake-model",
        KEEL_HTTP_PORT: String(port),
        KEEL_WEBCHAT_ENABLED: "false",
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

  /** Meta's retries, until every POST so far was answered 200. */
  async function allDelivered(): Promise<void> {
    await waitFor(
      () => {
        if (wa.deliveries.every((d) => d.status === 200)) return true;
        wa.retryUnanswered();
        return false;
      },
      { timeoutMs: 30_000, intervalMs: 200, message: "every webhook POST answered 200" },
    );
  }

  it("SIGKILL with turns running and POSTs unanswered: every message answered exactly once after the restart", async () => {
    let hold = true;
    model.script((request) => (hold ? { hang: true } : defaultScript(request)));
    let gateway = await startRunning();
    for (const user of USERS) wa.userSends({ from: user, text: `echo: answer ${user}` });
    await waitFor(() => model.requests.length >= USERS.length, {
      timeoutMs: 20_000,
      message: "three turns with the model",
    });
    // A burst right before the kill: stored or not, answered 200 or not, each is answered once.
    for (const user of BURST) wa.userSends({ from: user, text: `echo: burst ${user}` });
    gateway.kill("SIGKILL");
    await gateway.waitForExit(10_000);
    // Written while Keel is down: the POST fails, Meta tries again later.
    wa.userSends({ from: USERS[1]!, text: "echo: sent while down" });
    await waitFor(() => wa.deliveries.every((d) => d.status !== null), {
      message: "every POST answered or failed",
    });
    hold = false;
    // The message sent while down must not interrupt the same chat's resumed turn (the default
    // `interrupt` mode would, and the echo model then answers only the newer message): queued,
    // both are answered.
    gateway = await startRunning({ KEEL_GATEWAY_BUSY_INPUT_MODE: "queue" });
    await allDelivered();
    const expected: [string, string][] = [
      ...USERS.map((u): [string, string] => [u, `answer ${u}`]),
      ...BURST.map((u): [string, string] => [u, `burst ${u}`]),
      [USERS[1]!, "sent while down"],
    ];
    await waitFor(() => expected.every(([u, text]) => wa.botTexts(u).includes(text)), {
      timeoutMs: 30_000,
      message: "every message answered after the restart",
    });
    // Anything late arrives before the count: a marker turn after everything else.
    wa.userSends({ from: USERS[2]!, text: "echo: marker" });
    await waitFor(() => wa.botTexts(USERS[2]!).includes("marker"), { timeoutMs: 15_000 });
    for (const [user, text] of expected) {
      expect(
        wa.botTexts(user).filter((t) => t === text),
        `${user}: ${JSON.stringify(wa.botTexts(user))}`,
      ).toHaveLength(1);
    }
  }, 120_000);

  it("a crash after the commit and before the 200: Meta's retry is answered once", async () => {
    const first = await start({ KEEL_CRASH_POINT: "after_inbox_commit:1" });
    await waitFor(() => bootedPids(home.path).length > 0, {
      timeoutMs: 20_000,
      message: `running\n${first.output().slice(-2000)}`,
    });
    const { delivery } = wa.userSends({ from: USERS[0]!, text: "echo: committed, never answered" });
    const exit = await first.waitForExit(20_000);
    expect(exit.signal).toBe("SIGKILL");
    await waitFor(() => delivery.status !== null, { message: "the POST failed" });
    expect(delivery.status).not.toBe(200);
    await startRunning();
    await allDelivered();
    await waitFor(() => wa.botTexts(USERS[0]!).includes("committed, never answered"), {
      timeoutMs: 20_000,
    });
    wa.userSends({ from: USERS[0]!, text: "echo: marker" });
    await waitFor(() => wa.botTexts(USERS[0]!).includes("marker"), { timeoutMs: 15_000 });
    expect(wa.botTexts(USERS[0]!)).toEqual(["committed, never answered", "marker"]);
    expect(model.requests).toHaveLength(2);
  }, 90_000);
});
