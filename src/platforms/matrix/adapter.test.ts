import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { pino } from "pino";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { type FakeMatrix, startFakeMatrix } from "../../../test/fakes/matrix-server.js";
import { StoreSink } from "../../../test/helpers/store-sink.js";
import { createTempDir } from "../../../test/helpers/temp-home.js";
import { waitFor } from "../../../test/helpers/wait-for.js";
import { connectionLeaseKey, StoreConnectionLease } from "../../cluster/connection-lease.js";
import { SqliteStore } from "../../sessions/sqlite-store.js";
import { ENCRYPTED_NOTICE, MatrixAdapter, type MatrixAdapterOptions } from "./adapter.js";

const OWNER = "@owner:fake.test";
const STRANGER = "@stranger:fake.test";
const DM = "!dm:fake.test";
const ROOM = "!room:fake.test";

describe("MatrixAdapter against a stand-in homeserver", () => {
  let fake: FakeMatrix;
  let home: ReturnType<typeof createTempDir>;
  let store: SqliteStore;
  let sink: StoreSink;
  const adapters: MatrixAdapter[] = [];

  async function open(overrides: Partial<MatrixAdapterOptions> = {}): Promise<MatrixAdapter> {
    const adapter = new MatrixAdapter({
      homeserver: fake.homeserver,
      userId: fake.userId,
      accessToken: fake.accessToken,
      allowedUsers: [OWNER],
      adminUsers: [],
      store,
      logger: pino({ level: "silent" }),
      timing: { pollTimeoutMs: 200, backoffBaseMs: 20, backoffMaxMs: 100 },
      ...overrides,
    });
    adapters.push(adapter);
    await adapter.start(sink);
    return adapter;
  }

  beforeEach(async () => {
    fake = await startFakeMatrix();
    home = createTempDir("keel-matrix-adapter-");
    store = new SqliteStore(join(home.path, "state.db"));
    sink = new StoreSink(store);
    fake.setMembers(DM, [fake.userId, OWNER]);
    fake.setMembers(ROOM, [fake.userId, OWNER, "@c:fake.test"]);
  });

  afterEach(async () => {
    for (const adapter of adapters.splice(0)) await adapter.stop();
    await fake.close();
    await store.close();
    home.cleanup();
  });

  const synced = (position: number) =>
    waitFor(() => fake.sinceSeen.some((s) => s >= position), {
      message: `synced past ${position}`,
    });

  it("does not answer what was said before its first start, and resumes from the stored position", async () => {
    fake.userSays({ roomId: DM, sender: OWNER, body: "said before Keel came" });
    const first = await open();
    const { position } = fake.userSays({ roomId: DM, sender: OWNER, body: "first" });
    await synced(position);
    await first.stop();
    // Said while Keel was down: the next process syncs from the stored position.
    const down = fake.userSays({ roomId: DM, sender: OWNER, body: "while down" });
    await open();
    await synced(down.position);
    expect(sink.accepted).toEqual(["first", "while down"]);
    // One sync without a position: the very first.
    expect(fake.sinceSeen.filter((since) => since === 0)).toHaveLength(1);
  });

  it("answers every message in a direct chat, and in a larger room only when mentioned", async () => {
    await open();
    fake.userSays({ roomId: ROOM, sender: OWNER, body: "talking to others" });
    const { position } = fake.userSays({
      roomId: ROOM,
      sender: OWNER,
      body: `${fake.userId}: what time is it`,
    });
    await synced(position);
    expect(sink.accepted).toEqual(["what time is it"]);
  });

  it("takes files people send (mxc://, fetched with the token) and sends the agent's files", async () => {
    const adapter = await open();
    const { position } = fake.userSendsFile({
      roomId: DM,
      sender: OWNER,
      msgtype: "m.image",
      name: "cat.png",
      mime: "image/png",
      bytes: Buffer.from("png-bytes"),
      caption: "look at this",
    });
    await synced(position);
    await waitFor(() => sink.accepted.length === 1, { message: "the image stored" });
    const [stored] = await store.listOpenInbox();
    expect(stored!.text).toBe("look at this");
    const [attachment] = stored!.attachments!;
    expect(attachment).toMatchObject({
      kind: "photo",
      name: "cat.png",
      mime: "image/png",
      size: 9,
    });
    const signal = new AbortController().signal;
    expect((await adapter.fetchFile(attachment!, 1_000, signal)).toString()).toBe("png-bytes");
    await expect(adapter.fetchFile({ ...attachment!, size: undefined }, 4, signal)).rejects.toThrow(
      /larger than/,
    );
    const path = join(home.path, "report.csv");
    writeFileSync(path, "a,b\n");
    await adapter.deliver({
      outboxId: 5,
      sessionKey: "k",
      sessionId: "s",
      address: { platform: "matrix", chatId: DM },
      text: "the report",
      kind: "reply",
      file: { id: "f", path, name: "report.csv", mime: "text/csv", size: 4 },
    });
    const [sent] = fake.botFiles(DM);
    expect(sent!.content).toMatchObject({
      msgtype: "m.file",
      body: "the report",
      filename: "report.csv",
      info: { mimetype: "text/csv", size: 4 },
    });
    expect(sent!.bytes?.toString()).toBe("a,b\n");
  });

  it("gives a stranger a pairing code in a direct chat and stores nothing", async () => {
    fake.setMembers("!s:fake.test", [fake.userId, STRANGER]);
    await open();
    const { position } = fake.userSays({ roomId: "!s:fake.test", sender: STRANGER, body: "hi" });
    await synced(position);
    expect(sink.accepted).toEqual([]);
    await waitFor(() => fake.botTexts("!s:fake.test").some((t) => /pairing code is/.test(t)), {
      message: "a pairing code",
    });
  });

  it("accepts invites from allowed users only", async () => {
    await open();
    fake.invite("!mine:fake.test", OWNER);
    fake.invite("!theirs:fake.test", STRANGER);
    await waitFor(() => fake.joined.includes("!mine:fake.test"), { message: "joined" });
    fake.userSays({ roomId: DM, sender: OWNER, body: "after the invites" });
    await waitFor(() => sink.accepted.includes("after the invites"), { message: "synced on" });
    expect(fake.joined).toEqual(["!mine:fake.test"]);
  });

  it("says once per room that encrypted rooms are not supported", async () => {
    await open();
    fake.userSays({ roomId: DM, sender: OWNER, body: "", encrypted: true });
    const { position } = fake.userSays({ roomId: DM, sender: OWNER, body: "", encrypted: true });
    await synced(position);
    await waitFor(() => fake.botTexts(DM).includes(ENCRYPTED_NOTICE), { message: "the notice" });
    expect(fake.botTexts(DM)).toEqual([ENCRYPTED_NOTICE]);
    expect(sink.accepted).toEqual([]);
  });

  it("sends a retried row under the same transaction ids: the room gets it once", async () => {
    const adapter = await open();
    const reply = {
      outboxId: 7,
      sessionKey: `agent:main:matrix:room:${DM}`,
      sessionId: "s",
      address: { platform: "matrix", chatId: DM },
      text: "only once",
      kind: "reply" as const,
    };
    await adapter.deliver(reply);
    await adapter.deliver(reply);
    expect(fake.botTexts(DM)).toEqual(["only once"]);
  });

  it("is down when the homeserver refuses the token", async () => {
    const adapter = await open({ accessToken: "wrong" });
    await waitFor(() => adapter.connection().state === "down", { message: "down" });
    expect(adapter.status().error).toMatch(/MATRIX_ACCESS_TOKEN/);
  });
});

describe("MatrixAdapter with a connection lease (several gateways)", () => {
  it("syncs only while it holds the lease; the standby takes over from there", async () => {
    const fake = await startFakeMatrix();
    const home = createTempDir("keel-matrix-lease-");
    fake.setMembers(DM, [fake.userId, OWNER]);
    // One store holds the lease (as the shared database would); each gateway keeps its own
    // record, so a standby that synced anyway would store what the holder took.
    const shared = new SqliteStore(join(home.path, "lease.db"));
    const stores = [0, 1].map((i) => new SqliteStore(join(home.path, `gw${i}.db`)));
    const sinks = stores.map((store) => new StoreSink(store));
    const adapters = stores.map(
      (store, i) =>
        new MatrixAdapter({
          homeserver: fake.homeserver,
          userId: fake.userId,
          accessToken: fake.accessToken,
          allowedUsers: [OWNER],
          adminUsers: [],
          store,
          logger: pino({ level: "silent" }),
          timing: { pollTimeoutMs: 200, backoffBaseMs: 20, backoffMaxMs: 100 },
          connection: new StoreConnectionLease({
            store: shared,
            key: connectionLeaseKey("matrix", fake.accessToken),
            owner: `gw-${i}`,
            ttlMs: 60_000,
            logger: pino({ level: "silent" }),
            claimEveryMs: 20,
          }),
        }),
    );
    try {
      await adapters[0]!.start(sinks[0]!);
      await waitFor(() => fake.sinceSeen.length >= 2, { message: "the holder syncing" });
      await adapters[1]!.start(sinks[1]!);
      fake.userSays({ roomId: DM, sender: OWNER, body: "first" });
      await waitFor(() => sinks[0]!.accepted.includes("first"), { message: "the holder took it" });
      await adapters[0]!.stop();
      // Syncs from now on are the standby's (its own record starts at "now").
      const synced = fake.sinceSeen.length;
      await waitFor(() => fake.sinceSeen.length > synced, {
        timeoutMs: 15_000,
        message: "the standby syncing",
      });
      fake.userSays({ roomId: DM, sender: OWNER, body: "second" });
      await waitFor(() => sinks[1]!.accepted.includes("second"), {
        timeoutMs: 15_000,
        message: "the standby took over",
      });
      // The standby never synced while the holder did: "first" reached only the holder.
      expect(sinks[1]!.accepted).toEqual(["second"]);
      expect(sinks[0]!.accepted).toEqual(["first"]);
    } finally {
      for (const adapter of adapters) await adapter.stop();
      for (const store of [...stores, shared]) await store.close();
      await fake.close();
      home.cleanup();
    }
  });
});
