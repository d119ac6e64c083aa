/**
 * Two gateways' Discord adapters on one store and one bot: only the holder of the bot's
 * connection lease keeps a gateway connection; the standby takes over when the holder lets go,
 * RESUMEs the session the holder stored, and gets what was sent during the handover.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { type FakeDiscord, startFakeDiscord } from "../../../test/fakes/discord-server.js";
import { createMemoryLogger } from "../../../test/helpers/memory-logger.js";
import { storeHarnesses } from "../../../test/helpers/store-harness.js";
import { StoreSink } from "../../../test/helpers/store-sink.js";
import { waitFor } from "../../../test/helpers/wait-for.js";
import { connectionLeaseKey, StoreConnectionLease } from "../../cluster/connection-lease.js";
import type { Store } from "../../sessions/store.js";
import { DiscordAdapter } from "./adapter.js";
import type { DiscordTiming } from "./options.js";

const TOKEN = "discord-cluster-token";
const OWNER = { id: "100000000000000042", username: "owner" };

const FAST: Partial<DiscordTiming> = {
  deafAfterMs: 60_000,
  watchdogCheckMs: 50,
  backoffBaseMs: 20,
  backoffMaxMs: 200,
  stopTimeoutMs: 1_000,
  startWaitMs: 5_000,
  identifySpacingMs: 10,
  identifyMaxSpacingMs: 50,
};

describe.each(storeHarnesses())("Discord on two gateways sharing a $name store", (harness) => {
  let fake: FakeDiscord;
  let stores: Store[];
  let adapters: DiscordAdapter[];

  beforeEach(async () => {
    fake = await startFakeDiscord({ token: TOKEN });
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

  function gateway(index: number): { adapter: DiscordAdapter; sink: StoreSink } {
    const store = stores[index]!;
    const { logger } = createMemoryLogger();
    const adapter = new DiscordAdapter({
      token: TOKEN,
      apiRoot: fake.apiRoot,
      allowedUsers: [OWNER.id],
      adminUsers: [],
      freeChannels: [],
      store,
      logger,
      timing: FAST,
      connection: new StoreConnectionLease({
        store,
        key: connectionLeaseKey("discord", TOKEN),
        owner: `gw-${index}`,
        ttlMs: 60_000,
        logger,
        claimEveryMs: 20,
      }),
    });
    adapters.push(adapter);
    return { adapter, sink: new StoreSink(store) };
  }

  it("one connection at a time; the standby resumes the holder's session when it lets go", async () => {
    const a = gateway(0);
    await a.adapter.start(a.sink);
    await waitFor(() => fake.sessionIds().length === 1, { message: "A identified" });
    const b = gateway(1);
    await b.adapter.start(b.sink);
    expect(b.adapter.status().state).toBe("connected");

    const dm = fake.dmChannel(OWNER.id);
    fake.userSends({ channelId: dm, user: OWNER, content: "to the holder" });
    await waitFor(() => a.sink.accepted.includes("to the holder"), { message: "A stored it" });
    // B never opened a gateway connection of its own.
    expect(fake.connections()).toBe(1);
    expect(fake.identifies()).toHaveLength(1);

    // A stops (a planned stop or a deploy): it stores its session and lets the lease go.
    await a.adapter.stop();
    fake.userSends({ channelId: dm, user: OWNER, content: "during the handover" });
    await waitFor(() => b.sink.accepted.includes("during the handover"), {
      timeoutMs: 10_000,
      message: "B resumed and got the message sent meanwhile",
    });
    expect(fake.identifies()).toHaveLength(1);
    expect(fake.resumes().map((r) => r.session_id)).toEqual(fake.sessionIds());
    expect(a.sink.accepted).toEqual(["to the holder"]);
    expect(b.sink.accepted).toEqual(["during the handover"]);
  });
});
