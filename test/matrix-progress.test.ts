/**
 * Matrix progress through the real gateway: a streamed reply is shown as a preview edited in
 * place with `m.replace` events, and ends as one message holding the whole reply.
 */
import { afterEach, beforeEach, expect, it } from "vitest";
import { loadConfig } from "../src/config/load-config.js";
import type { Gateway } from "../src/gateway/gateway.js";
import { type FakeMatrix, startFakeMatrix } from "./fakes/matrix-server.js";
import { type FakeOpenAI, startFakeOpenAI } from "./fakes/openai-server.js";
import { createTestGateway, stopTestGateway } from "./helpers/in-process-gateway.js";
import { createTempDir } from "./helpers/temp-home.js";
import { waitFor } from "./helpers/wait-for.js";

const USER = "@owner:fake.test";
const ROOM = "!dm:fake.test";

let home: ReturnType<typeof createTempDir>;
let model: FakeOpenAI;
let mx: FakeMatrix;
let gateway: Gateway | undefined;

beforeEach(async () => {
  home = createTempDir("keel-matrix-progress-");
  model = await startFakeOpenAI();
  mx = await startFakeMatrix();
  mx.setMembers(ROOM, [mx.userId, USER]);
});
afterEach(async () => {
  await stopTestGateway(gateway);
  gateway = undefined;
  await mx.close();
  await model.close();
  home.cleanup();
});

it("edits a streamed reply in place with m.replace and ends with the whole reply in one message", async () => {
  const reply = Array.from({ length: 30 }, (_, i) => `Sentence number ${i + 1} is here.`).join(" ");
  model.script({ text: reply, chunkDelayMs: 30 });
  const { config } = loadConfig({
    home: home.path,
    env: {
      KEEL_WEBCHAT_ENABLED: "false",
      MATRIX_HOMESERVER: mx.homeserver,
      MATRIX_USER_ID: mx.userId,
      MATRIX_ACCESS_TOKEN: mx.accessToken,
      MATRIX_ALLOWED_USERS: USER,
      OPENAI_BASE_URL: model.baseUrl,
      KEEL_MODEL: "fake-model",
      KEEL_HTTP_PORT: "0",
    },
  });
  gateway = createTestGateway(config);
  await gateway.start();
  const running = gateway;
  await waitFor(async () => (await running.status()).platforms.matrix?.state === "connected", {
    timeoutMs: 15_000,
    message: "matrix connected",
  });
  mx.userSays({ roomId: ROOM, sender: USER, body: "write a lot" });
  await waitFor(() => mx.botTexts(ROOM).includes(reply), {
    timeoutMs: 30_000,
    message: `the whole reply: ${JSON.stringify(mx.botTexts(ROOM))}`,
  });
  expect(mx.botTexts(ROOM)).toEqual([reply]);
  const edits = mx.calls.filter(
    (c) =>
      c.path.includes("/send/") &&
      (c.body["m.relates_to"] as { rel_type?: string } | undefined)?.rel_type === "m.replace",
  );
  expect(edits.length).toBeGreaterThanOrEqual(1);
});
