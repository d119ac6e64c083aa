/**
 * The database goes away between the platform accepting a reply and the store marking it
 * delivered (a Postgres restart): the reply must not be sent again once the database is back.
 */
import pino from "pino";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { startTcpProxy, type TcpProxy } from "../../test/fakes/tcp-proxy.js";
import { RecordingAdapter } from "../../test/helpers/recording-adapter.js";
import { adminQuery, createTestSchema } from "../../test/helpers/store-harness.js";
import { waitFor } from "../../test/helpers/wait-for.js";
import type { OutboundReply } from "../contract/platform.js";
import { PgStore } from "../sessions/pg-store.js";
import { OutboxDispatcher } from "./outbox-dispatcher.js";

/** A platform that accepts the message, and the database becomes unreachable at that moment. */
class CutAfterSend extends RecordingAdapter {
  cut: (() => Promise<void>) | null = null;
  override async deliver(reply: OutboundReply): Promise<void> {
    await super.deliver(reply);
    const cut = this.cut;
    this.cut = null;
    await cut?.();
  }
}

describe.skipIf(process.env.KEEL_TEST_PG === "skip")(
  "outbox delivery across a database outage",
  () => {
    let schema: Awaited<ReturnType<typeof createTestSchema>>;
    let proxy: TcpProxy;
    let store: PgStore;
    let dispatcher: OutboxDispatcher;

    beforeEach(async () => {
      schema = await createTestSchema();
      proxy = await startTcpProxy({ host: "127.0.0.1", port: 5432 });
      store = await PgStore.open(`postgres://postgres@127.0.0.1:${proxy.port}/test`, {
        schema: schema.schema,
      });
    });
    afterEach(async () => {
      dispatcher?.stop();
      await store.close();
      await proxy.close();
      await schema.drop();
    });

    it("a reply sent just before the database went away is marked, not sent again", async () => {
      const adapter = new CutAfterSend();
      adapter.cut = () => proxy.cut();
      dispatcher = new OutboxDispatcher({
        store,
        logger: pino({ level: "silent" }),
        crashPoint: () => {},
        retryDelayMs: 50,
        sweepMs: 0,
      });
      dispatcher.register(adapter);
      const address = { platform: "test", chatId: "a" };
      const session = await store.ensureSession("k:a", address);
      await store.enqueueOutbox({
        sessionKey: "k:a",
        sessionId: session.sessionId,
        address,
        text: "the reply",
        kind: "reply",
      });
      dispatcher.kick();
      await waitFor(() => adapter.texts("a").length === 1, { message: "sent once" });
      await proxy.restore();
      const state = async () =>
        (await adminQuery(`SELECT state FROM ${schema.schema}.outbox`))[0]?.state;
      await waitFor(async () => (await state()) === "delivered", {
        timeoutMs: 15_000,
        message: "marked delivered once the database is back",
      });
      expect(adapter.texts("a")).toEqual(["the reply"]);
    });
  },
);
