/**
 * Matrix end to end: the built gateway process against the stand-in homeserver and the fake
 * model, killed with SIGKILL while synced batches are being stored and turns run.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { type FakeMatrix, startFakeMatrix } from "../fakes/matrix-server.js";
import { defaultScript, type FakeOpenAI, startFakeOpenAI } from "../fakes/openai-server.js";
import {
  bootedPids,
  freePort,
  type GatewayProcess,
  startGatewayProcess,
} from "../helpers/gateway-process.js";
import { createTempDir } from "../helpers/temp-home.js";
import { waitFor } from "../helpers/wait-for.js";

const USERS = ["@ann:fake.test", "@bob:fake.test", "@cat:fake.test"];
const BURST = ["@b1:fake.test", "@b2:fake.test", "@b3:fake.test", "@b4:fake.test", "@b5:fake.test"];
const roomOf = (user: string) => `!dm-${user.slice(1, user.indexOf(":"))}:fake.test`;

describe("Matrix with the real gateway process", () => {
  let home: ReturnType<typeof createTempDir>;
  let mx: FakeMatrix;
  let model: FakeOpenAI;
  let port: number;
  const spawned: GatewayProcess[] = [];

  beforeEach(async () => {
    home = createTempDir("keel-matrix-e2e-");
    mx = await startFakeMatrix();
    for (const user of [...USERS, ...BURST]) mx.setMembers(roomOf(user), [mx.userId, user]);
    model = await startFakeOpenAI();
    port = await freePort();
  });

  afterEach(async () => {
    for (const gateway of spawned.splice(0)) await gateway.stop();
    await mx.close();
    await model.close();
    home.cleanup();
  });

  async function start(extra: Record<string, string> = {}): Promise<GatewayProcess> {
    const gateway = await startGatewayProcess({
      home: home.path,
      env: {
        MATRIX_HOMESERVER: mx.homeserver,
        MATRIX_USER_ID: mx.userId,
        MATRIX_ACCESS_TOKEN: mx.accessToken,
        MATRIX_ALLOWED_USERS: [...USERS, ...BURST].join(","),
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

  /** The first sync (which skips history) is done: what is said from now on is answered. */
  const listening = () =>
    waitFor(() => mx.sinceSeen.length >= 2, {
      timeoutMs: 20_000,
      message: "syncing",
    });

  it("SIGKILL with turns running and batches unstored: every message answered exactly once after the restart", async () => {
    let hold = true;
    model.script((request) => (hold ? { hang: true } : defaultScript(request)));
    let gateway = await startRunning();
    await listening();
    for (const user of USERS) {
      mx.userSays({ roomId: roomOf(user), sender: user, body: `echo: answer ${user}` });
    }
    await waitFor(() => model.requests.length >= USERS.length, {
      timeoutMs: 20_000,
      message: "three turns with the model",
    });
    for (const user of BURST) {
      mx.userSays({ roomId: roomOf(user), sender: user, body: `echo: burst ${user}` });
    }
    gateway.kill("SIGKILL");
    await gateway.waitForExit(10_000);
    mx.userSays({ roomId: roomOf(USERS[1]!), sender: USERS[1]!, body: "echo: sent while down" });
    hold = false;
    // Bob's message sent while down must not interrupt his resumed turn (the default `interrupt`
    // mode would, and the echo model then answers only the newer message): queued, both are
    // answered, whichever comes first after the start.
    gateway = await startRunning({ KEEL_GATEWAY_BUSY_INPUT_MODE: "queue" });
    const expected: [string, string][] = [
      ...USERS.map((u): [string, string] => [roomOf(u), `answer ${u}`]),
      ...BURST.map((u): [string, string] => [roomOf(u), `burst ${u}`]),
      [roomOf(USERS[1]!), "sent while down"],
    ];
    await waitFor(() => expected.every(([room, text]) => mx.botTexts(room).includes(text)), {
      timeoutMs: 30_000,
      message: "every message answered after the restart",
    });
    mx.userSays({ roomId: roomOf(USERS[2]!), sender: USERS[2]!, body: "echo: marker" });
    await waitFor(() => mx.botTexts(roomOf(USERS[2]!)).includes("marker"), { timeoutMs: 15_000 });
    for (const [room, text] of expected) {
      expect(
        mx.botTexts(room).filter((t) => t === text),
        `${room}: ${JSON.stringify(mx.botTexts(room))}`,
      ).toHaveLength(1);
    }
  }, 120_000);

  it("a crash after the commit and before the sync position is stored: synced again, answered once", async () => {
    const first = await start({ KEEL_CRASH_POINT: "after_inbox_commit:1" });
    await listening();
    const user = USERS[0]!;
    mx.userSays({
      roomId: roomOf(user),
      sender: user,
      body: "echo: committed, position not stored",
    });
    const exit = await first.waitForExit(20_000);
    expect(exit.signal).toBe("SIGKILL");
    const before = mx.sinceSeen.length;
    await startRunning();
    await waitFor(() => mx.botTexts(roomOf(user)).includes("committed, position not stored"), {
      timeoutMs: 20_000,
    });
    // The restarted gateway synced from before the message: the batch came again.
    expect(mx.sinceSeen.length).toBeGreaterThan(before);
    mx.userSays({ roomId: roomOf(user), sender: user, body: "echo: marker" });
    await waitFor(() => mx.botTexts(roomOf(user)).includes("marker"), { timeoutMs: 15_000 });
    expect(mx.botTexts(roomOf(user))).toEqual(["committed, position not stored", "marker"]);
    expect(model.requests).toHaveLength(2);
  }, 90_000);
});
