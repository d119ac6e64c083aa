/**
 * Two gateways' dispatchers on one store: each chat's rows are sent by the one holding that
 * chat's delivery lease, so every row goes out once and a chat's rows stay in order.
 */
import { setTimeout as sleep } from "node:timers/promises";
import pino from "pino";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createMemoryLogger } from "../../test/helpers/memory-logger.js";
import { RecordingAdapter } from "../../test/helpers/recording-adapter.js";
import { storeHarnesses } from "../../test/helpers/store-harness.js";
import { waitFor } from "../../test/helpers/wait-for.js";
import type { OutboundReply } from "../contract/platform.js";
import type { Store } from "../sessions/store.js";
import { OutboxDispatcher } from "./outbox-dispatcher.js";

/** A platform that takes a moment per message, so two senders would overlap. */
class SlowAdapter extends RecordingAdapter {
  override async deliver(reply: OutboundReply): Promise<void> {
    await sleep(5);
    return super.deliver(reply);
  }
}

/** A platform whose sends wait until the test lets them through. */
class GatedAdapter extends RecordingAdapter {
  started = 0;
  private open!: () => void;
  private readonly gate = new Promise<void>((resolve) => {
    this.open = resolve;
  });
  override async deliver(reply: OutboundReply): Promise<void> {
    this.started += 1;
    await this.gate;
    return super.deliver(reply);
  }
  release(): void {
    this.open();
  }
}

describe.each(storeHarnesses())("outbox delivery by two gateways on one $name store", (harness) => {
  let stores: Store[];
  let dispatchers: OutboxDispatcher[];

  beforeEach(async () => {
    await harness.setup();
    stores = [await harness.open(), await harness.open()];
    dispatchers = [];
  });
  afterEach(async () => {
    for (const d of dispatchers) d.stop();
    await Promise.all(stores.map((s) => s.close()));
    await harness.teardown();
  });

  it("sends every row once, each chat in order", async () => {
    const adapters = stores.map((store, i) => {
      const adapter = new SlowAdapter();
      const dispatcher = new OutboxDispatcher({
        store,
        logger: pino({ level: "silent" }),
        crashPoint: () => {},
        retryDelayMs: 20,
        sweepMs: 20,
        chatLeases: { owner: `gw-${i}`, ttlMs: 60_000 },
      });
      dispatcher.register(adapter);
      dispatchers.push(dispatcher);
      return adapter;
    });
    const expected: Record<string, string[]> = { a: [], b: [] };
    for (const chatId of ["a", "b"]) {
      const address = { platform: "test", chatId };
      const session = await stores[0]!.ensureSession(`k:${chatId}`, address);
      for (let n = 1; n <= 6; n++) {
        const text = `${chatId}${n}`;
        expected[chatId]!.push(text);
        await stores[0]!.enqueueOutbox({
          sessionKey: `k:${chatId}`,
          sessionId: session.sessionId,
          address,
          text,
          kind: "reply",
        });
      }
    }
    for (const d of dispatchers) d.kick();
    await waitFor(async () => (await stores[1]!.listPendingOutbox()).length === 0, {
      timeoutMs: 15_000,
      message: "every row delivered",
    });
    for (const chatId of ["a", "b"]) {
      const sent = adapters.flatMap((a) => a.texts(chatId));
      expect([...sent].sort()).toEqual([...expected[chatId]!].sort());
      // In order: whichever gateway sent a row, none of its chat's later rows went out before it.
      for (const adapter of adapters) {
        const mine = adapter.texts(chatId);
        expect(mine).toEqual([...mine].sort());
      }
    }
  });

  /** Gateway 0's dispatcher over `adapter`, with this delivery lease TTL; one row queued for chat a. */
  async function oneRowFor(
    adapter: GatedAdapter,
    ttlMs: number,
    logger = pino({ level: "silent" }),
  ) {
    const dispatcher = new OutboxDispatcher({
      store: stores[0]!,
      logger,
      crashPoint: () => {},
      retryDelayMs: 20,
      sweepMs: 0,
      chatLeases: { owner: "gw-0", ttlMs },
    });
    dispatcher.register(adapter);
    dispatchers.push(dispatcher);
    const address = { platform: "test", chatId: "a" };
    const session = await stores[0]!.ensureSession("k:a", address);
    const row = await stores[0]!.enqueueOutbox({
      sessionKey: "k:a",
      sessionId: session.sessionId,
      address,
      text: "long send",
      kind: "reply",
    });
    dispatcher.kick();
    await waitFor(() => adapter.started === 1, { message: "the send started" });
    return row;
  }

  it("keeps the chat's delivery lease through a send that outlasts its TTL", async () => {
    const adapter = new GatedAdapter();
    await oneRowFor(adapter, 300);
    // Well past the TTL: without renewals the lease would have run out and been free.
    await sleep(900);
    expect(await stores[1]!.claimSessionLease("outbox:test:a:", "gw-1", 60_000)).toBeNull();
    adapter.release();
    await waitFor(async () => (await stores[1]!.listPendingOutbox()).length === 0, {
      message: "the row marked delivered by the gateway that sent it",
    });
    expect(adapter.texts("a")).toEqual(["long send"]);
  });

  it("a gateway whose delivery lease moved on during the send marks nothing", async () => {
    const adapter = new GatedAdapter();
    const { logger, lines } = createMemoryLogger();
    const row = await oneRowFor(adapter, 60_000, logger);
    // Gateway 0 is presumed gone (its row removed frees its leases); gateway 1 takes the chat.
    await stores[1]!.removeInstance("gw-0");
    const theirs = await stores[1]!.claimSessionLease("outbox:test:a:", "gw-1", 60_000);
    expect(theirs).not.toBeNull();
    adapter.release();
    await waitFor(() => lines.some((l) => String(l.msg).includes("delivery lease moved")), {
      message: "the refused mark reported",
    });
    // Still pending, no failed attempt counted: the chat's holder decides what to send.
    const pending = await stores[1]!.listPendingOutbox();
    expect(pending.map((o) => [o.id, o.attempts])).toEqual([[row.id, 0]]);
  });

  it("leaves a row another live gateway queued to it, and sends it once that gateway is gone", async () => {
    const queuer = await harness.open(undefined, { instanceId: "gw-0" });
    try {
      await queuer.registerInstance({ id: "gw-0", host: "h", pid: 1, startedAt: 1 });
      const address = { platform: "test", chatId: "a" };
      const session = await queuer.ensureSession("k:a", address);
      await queuer.enqueueOutbox({
        sessionKey: "k:a",
        sessionId: session.sessionId,
        address,
        text: "gw-0's reply",
        kind: "reply",
      });
      const adapter = new RecordingAdapter();
      const { logger, lines } = createMemoryLogger();
      const other = new OutboxDispatcher({
        store: stores[1]!,
        logger,
        crashPoint: () => {},
        retryDelayMs: 20,
        sweepMs: 20,
        chatLeases: { owner: "gw-1", ttlMs: 60_000 },
      });
      other.register(adapter);
      dispatchers.push(other);
      other.kick();
      // gw-1 takes the chat's lease, reads the row and leaves it (several passes).
      await waitFor(async () => (await stores[1]!.listSessionLeases()).length > 0);
      await sleep(200);
      expect(adapter.texts("a")).toEqual([]);
      expect(lines.filter((l) => Number(l.level) >= 50)).toEqual([]);
      // gw-0 is gone (its row removed): its rows are anybody's.
      await queuer.removeInstance("gw-0");
      await waitFor(() => adapter.texts("a").length === 1, { message: "sent by gw-1" });
      expect(adapter.texts("a")).toEqual(["gw-0's reply"]);
    } finally {
      await queuer.close();
    }
  });

  it("sends a row queued by a live gateway that lacks the chat's platform, and the chat's rows after it", async () => {
    // gw-0 has no "test" platform (say Telegram is configured on gw-1 only), yet ran a turn of
    // one of its chats (a takeover) and queued the reply: it never sends it.
    const queuer = await harness.open(undefined, { instanceId: "gw-0" });
    try {
      await queuer.registerInstance({
        id: "gw-0",
        host: "h",
        pid: 1,
        startedAt: 1,
        platforms: ["api"],
      });
      await stores[1]!.registerInstance({
        id: "gw-1",
        host: "h",
        pid: 2,
        startedAt: 1,
        platforms: ["test"],
      });
      const queue = async (store: Store, chatId: string, text: string) => {
        const address = { platform: "test", chatId };
        const session = await store.ensureSession(`k:${chatId}`, address);
        await store.enqueueOutbox({
          sessionKey: `k:${chatId}`,
          sessionId: session.sessionId,
          address,
          text,
          kind: "reply",
        });
      };
      await queue(queuer, "a", "from gw-0");
      await queue(stores[1]!, "a", "later, from gw-1");
      await queue(stores[1]!, "b", "other chat");
      const adapter = new RecordingAdapter();
      const other = new OutboxDispatcher({
        store: stores[1]!,
        logger: pino({ level: "silent" }),
        crashPoint: () => {},
        retryDelayMs: 20,
        sweepMs: 20,
        chatLeases: { owner: "gw-1", ttlMs: 60_000 },
      });
      other.register(adapter);
      dispatchers.push(other);
      other.kick();
      await waitFor(async () => (await stores[1]!.listPendingOutbox()).length === 0, {
        message: "every row sent while gw-0 lives",
      });
      expect(adapter.texts("a")).toEqual(["from gw-0", "later, from gw-1"]);
      expect(adapter.texts("b")).toEqual(["other chat"]);
      expect(await stores[1]!.listLiveInstances(60_000)).toEqual(["gw-0", "gw-1"]);
      expect(await stores[1]!.listLiveInstances(60_000, "test")).toEqual(["gw-1"]);
    } finally {
      await queuer.close();
    }
  });
});
