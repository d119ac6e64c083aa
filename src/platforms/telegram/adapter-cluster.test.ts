/**
 * Two gateways' Telegram adapters on one store and one bot token: only the holder of the
 * poller lease calls getUpdates; a standby polls once the holder lets go, and a holder whose
 * polling ends by itself (a rejected token) lets the poller go too.
 */
import pino from "pino";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { type FakeTelegram, startFakeTelegram } from "../../../test/fakes/telegram-server.js";
import { sqliteHarness } from "../../../test/helpers/store-harness.js";
import { StoreSink } from "../../../test/helpers/store-sink.js";
import { waitFor } from "../../../test/helpers/wait-for.js";
import { connectionLeaseKey, StoreConnectionLease } from "../../cluster/connection-lease.js";
import type { Store } from "../../sessions/store.js";
import { TelegramAdapter } from "./adapter.js";

const TOKEN = "123456:cluster-test-token";
const OWNER = 42;
const KEY = connectionLeaseKey("telegram", TOKEN);

describe("Telegram on two gateways sharing a store", () => {
  const harness = sqliteHarness();
  let fake: FakeTelegram;
  let stores: Store[];
  let adapters: TelegramAdapter[];

  beforeEach(async () => {
    fake = await startFakeTelegram({ token: TOKEN });
    await harness.setup();
    stores = [await harness.open(), await harness.open()];
    adapters = [];
  });
  afterEach(async () => {
    for (const adapter of adapters) await adapter.stop();
    await Promise.all(stores.map((s) => s.close()));
    await harness.teardown();
    await fake.close();
  });

  function gateway(index: number): { adapter: TelegramAdapter; sink: StoreSink } {
    const store = stores[index]!;
    const logger = pino({ level: "silent" });
    const adapter = new TelegramAdapter({
      token: TOKEN,
      apiRoot: fake.apiRoot,
      allowedUsers: [String(OWNER)],
      groupSessionsPerUser: false,
      pairing: store,
      logger,
      timing: { pollTimeoutSec: 1, conflictRetryMs: 100, backoffBaseMs: 20, backoffMaxMs: 100 },
      poller: new StoreConnectionLease({
        store,
        key: KEY,
        owner: `gw-${index}`,
        ttlMs: 60_000,
        logger,
        claimEveryMs: 20,
      }),
    });
    adapters.push(adapter);
    return { adapter, sink: new StoreSink(store) };
  }

  it("only the holder polls; the standby polls on from the confirmed offset once it lets go", async () => {
    const a = gateway(0);
    await a.adapter.start(a.sink);
    const b = gateway(1);
    await b.adapter.start(b.sink);
    fake.sendUserMessage({ chatId: OWNER, text: "one" });
    await waitFor(() => a.sink.accepted.includes("one"), { message: "the holder stored it" });
    // Two pollers would make Telegram answer 409; the standby never asked.
    expect(fake.sent.filter((c) => c.method === "getUpdates" && !c.ok)).toEqual([]);

    await a.adapter.stop();
    fake.sendUserMessage({ chatId: OWNER, text: "two" });
    await waitFor(() => b.sink.accepted.includes("two"), { message: "the standby took over" });
    expect(a.sink.accepted).toEqual(["one"]);
    expect(b.sink.accepted).toEqual(["two"]);
    expect((await stores[1]!.listSessionLeases()).find((l) => l.sessionKey === KEY)?.owner).toBe(
      "gw-1",
    );
  });

  it("a holder whose polling ends by itself (token rejected) lets the poller go", async () => {
    fake.failNext("getUpdates", { error_code: 401, description: "Unauthorized" });
    const a = gateway(0);
    await a.adapter.start(a.sink);
    await waitFor(() => a.adapter.status().state === "error", { message: "401 reported" });
    await waitFor(async () => (await stores[1]!.claimSessionLease(KEY, "gw-1", 60_000)) !== null, {
      message: "the poller lease free for another gateway",
    });
  });
});
