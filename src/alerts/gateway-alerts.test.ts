import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { pino } from "pino";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { waitFor } from "../../test/helpers/wait-for.js";
import { ModelHealth } from "../agent/model-health.js";
import type { ChatAddress, ConnectionReport } from "../contract/platform.js";
import { chatFor, parseAlertChat } from "./alert-delivery.js";
import type { AlertEvent } from "./alert-monitor.js";
import { createGatewayAlerts, type GatewayAlerts } from "./gateway-alerts.js";

/** A webhook and heartbeat receiver on loopback: every request in arrival order. */
interface Receiver {
  url: string;
  log: ({ kind: "beat" } | ({ kind: "alert" } & AlertEvent))[];
  /** The next webhook posts answered 500 (then retried by the sender). */
  refuse: number;
  close(): Promise<void>;
}

async function startReceiver(): Promise<Receiver> {
  const receiver = { log: [], refuse: 0 } as unknown as Receiver;
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      if (req.url === "/beat" && req.method === "GET") {
        receiver.log.push({ kind: "beat" });
      } else if (req.url === "/hook" && req.method === "POST") {
        if (receiver.refuse > 0) {
          receiver.refuse -= 1;
          res.writeHead(500).end();
          return;
        }
        receiver.log.push({ kind: "alert", ...JSON.parse(Buffer.concat(chunks).toString()) });
      }
      res.writeHead(200).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  receiver.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  receiver.close = () => new Promise<void>((resolve) => server.close(() => resolve()));
  return receiver;
}

const T0 = Date.parse("2026-01-01T12:00:00.000Z");

describe("gateway alerts", () => {
  let receiver: Receiver;
  let alerts: GatewayAlerts | null;
  let clock: number;
  // What the gateway would report: each set by the test as the situation changes.
  let connections: Record<string, ConnectionReport>;
  let model: ModelHealth;
  let oldest: number | null;
  let heldBack: number;
  let freeShare: number;
  let notices: { address: ChatAddress; text: string }[];

  beforeEach(async () => {
    receiver = await startReceiver();
    clock = T0;
    connections = {
      telegram: { state: "connected", lastEventAt: T0 },
      slack: { state: "connected", lastEventAt: T0 },
    };
    model = new ModelHealth(() => clock);
    oldest = null;
    heldBack = 0;
    freeShare = 0.5;
    notices = [];
    alerts = createGatewayAlerts({
      config: {
        alerts: {
          webhook: `${receiver.url}/hook`,
          chat: "telegram:42",
          after: 300,
          heartbeat_url: `${receiver.url}/beat`,
          heartbeat_every: 60,
        },
      },
      signals: {
        connections: () => connections,
        modelFailing: () => model.failingSince(),
        oldestUndelivered: async () => oldest,
        heldBack: () => heldBack,
        freeDiskShare: async () => freeShare,
      },
      sendNotice: async (address, text) => {
        notices.push({ address, text });
      },
      homeChannels: async () => [
        { platform: "telegram", chatId: "42" },
        { platform: "slack", chatId: "CHOME" },
      ],
      logger: pino({ level: "silent" }),
      now: () => clock,
      webhookRetry: { attempts: 5, baseMs: 10, maxMs: 50, timeoutMs: 2_000 },
    });
  });

  afterEach(async () => {
    await alerts?.stop();
    await receiver.close();
  });

  /** Moves the injected clock and looks at the conditions once. */
  async function at(seconds: number): Promise<void> {
    clock = T0 + seconds * 1000;
    await alerts!.monitor.tick();
  }

  const alertLog = () =>
    receiver.log.flatMap((e) => (e.kind === "alert" ? [`${e.alert} ${e.state}`] : []));

  it("raises each condition once after it held for `after`, and clears it once", async () => {
    await at(0);
    connections.telegram = { state: "stalled", lastEventAt: T0 };
    model.record({
      model: "m",
      attempt: 1,
      outcome: "network",
      error: "fetch failed: http://user:secret@10.0.0.9/v1",
    });
    oldest = T0;
    await at(10);
    await at(299);
    expect(alerts!.monitor.raised()).toEqual([]);
    await at(310);
    await at(400);
    expect(alerts!.monitor.raised().sort()).toEqual([
      "model_failing",
      "outbox_stuck",
      "platform_down:telegram",
    ]);
    // At once, not after `after`.
    heldBack = 2;
    freeShare = 0.01;
    await at(401);
    await at(402);
    connections.telegram = { state: "connected", lastEventAt: T0 + 402_000 };
    model.record({ model: "m", attempt: 1, outcome: "ok" });
    oldest = T0 + 390_000; // the stuck reply went out; a young one waits
    heldBack = 0;
    freeShare = 0.2;
    await at(403);
    await at(404);
    const expected = [
      "platform_down:telegram raised",
      "model_failing raised",
      "outbox_stuck raised",
      "restart_loop raised",
      "disk_low raised",
      "platform_down:telegram cleared",
      "model_failing cleared",
      "restart_loop cleared",
      "disk_low cleared",
      "outbox_stuck cleared",
    ];
    await waitFor(() => alertLog().length === expected.length, { message: "all delivered" });
    expect(alertLog().sort()).toEqual([...expected].sort());
    const raised = receiver.log.find((e) => e.kind === "alert" && e.alert === "disk_low");
    expect(raised).toMatchObject({ state: "raised", at: "2026-01-01T12:06:41.000Z" });
    expect(raised && "detail" in raised && raised.detail).toMatch(/1\.0 % of the store's volume/);
    const failing = receiver.log.find((e) => e.kind === "alert" && e.alert === "model_failing");
    expect(failing && "detail" in failing && failing.detail).toMatch(/user:\*\*\*@10\.0\.0\.9/);
    expect(JSON.stringify(receiver.log)).not.toContain("secret");
    // The chat got the same, one notice each.
    expect(notices.map((n) => n.text.split("\n")[0])).toHaveLength(expected.length);
  });

  it("retries a refusing webhook until it takes the alert, in order, each once", async () => {
    receiver.refuse = 2;
    await at(0);
    heldBack = 1;
    await at(1);
    heldBack = 0;
    await at(2);
    await waitFor(() => alertLog().length === 2, { message: "both delivered" });
    expect(alertLog()).toEqual(["restart_loop raised", "restart_loop cleared"]);
  });

  it("tells another platform's home channel when the chat's own platform is down", async () => {
    await at(0);
    connections.telegram = { state: "down", lastEventAt: null };
    connections.slack = { state: "reconnecting", lastEventAt: T0 };
    await at(1);
    await at(301);
    await waitFor(() => notices.length === 2, { message: "both queued" });
    const byText = Object.fromEntries(notices.map((n) => [n.text.split("\n")[0], n.address]));
    expect(byText["⚠️ Alert: platform_down:telegram"]).toEqual({
      platform: "slack",
      chatId: "CHOME",
    });
    expect(byText["⚠️ Alert: platform_down:slack"]).toEqual({ platform: "telegram", chatId: "42" });
  });

  it("fetches the heartbeat while nothing is raised, and not while a platform is down", async () => {
    await at(0);
    await at(30);
    await at(60);
    await waitFor(() => receiver.log.filter((e) => e.kind === "beat").length === 2);
    connections.slack = { state: "down", lastEventAt: null };
    await at(61);
    await at(400); // raised
    await at(500);
    await at(600);
    connections.slack = { state: "connected", lastEventAt: T0 + 600_000 };
    await at(601); // cleared, and a beat again
    await waitFor(() => receiver.log.filter((e) => e.kind === "beat").length === 3);
    await waitFor(() => alertLog().length === 2);
    const kinds = receiver.log.map((e) => (e.kind === "beat" ? "beat" : `${e.alert} ${e.state}`));
    expect(kinds.slice(0, 3)).toEqual(["beat", "beat", "platform_down:slack raised"]);
    // The clear and the next beat come from one tick: in either order, and nothing in between.
    expect(kinds.slice(3).sort()).toEqual(["beat", "platform_down:slack cleared"]);
  });

  it("is off without a webhook, a chat or a heartbeat URL; a malformed chat is refused", () => {
    expect(
      createGatewayAlerts({
        config: { alerts: { after: 300, heartbeat_every: 60 } },
        signals: {
          connections: () => ({}),
          modelFailing: () => null,
          oldestUndelivered: async () => null,
          heldBack: () => 0,
          freeDiskShare: async () => 1,
        },
        sendNotice: async () => {},
        homeChannels: async () => [],
        logger: pino({ level: "silent" }),
        now: Date.now,
      }),
    ).toBeNull();
    expect(() => parseAlertChat("telegram")).toThrow(/platform:chat/);
    expect(parseAlertChat("slack:C1:1712.0001")).toEqual({
      platform: "slack",
      chatId: "C1",
      threadId: "1712.0001",
    });
    expect(chatFor("model_failing", { platform: "telegram", chatId: "1" }, [])).toEqual({
      platform: "telegram",
      chatId: "1",
    });
  });
});
