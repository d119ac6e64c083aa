/**
 * Web chat attachments through the real gateway: `POST /uploads`, then a WebSocket `send` naming
 * the upload; the model gets the image, the user's event names the file. (The page's attach
 * button, paste and drop call exactly these; the browser suite needs Chromium.)
 */
import { readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import WebSocket from "ws";
import {
  type FakeOpenAI,
  imagePartsOf,
  lastUserText,
  startFakeOpenAI,
} from "../fakes/openai-server.js";
import { type InProcessGateway, startInProcessGateway } from "../helpers/in-process-gateway.js";
import { createTempDir } from "../helpers/temp-home.js";
import { waitFor } from "../helpers/wait-for.js";

const PNG = Buffer.from(
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==",
  "base64",
);
const CONVERSATION = "c0nversation-1";

let model: FakeOpenAI;
let home: ReturnType<typeof createTempDir>;
let gw: InProcessGateway;

beforeEach(async () => {
  model = await startFakeOpenAI();
  home = createTempDir("keel-webchat-upload-");
  gw = await startInProcessGateway({
    home: home.path,
    modelBaseUrl: model.baseUrl,
    env: { KEEL_WEBCHAT_ENABLED: "true" },
  });
});

afterEach(async () => {
  await gw.shutdown();
  await model.close();
  home.cleanup();
});

function upload(body: Buffer, token: string | null = gw.controlToken) {
  return fetch(`${gw.url}/uploads`, {
    method: "POST",
    headers: {
      "content-type": "image/png",
      ...(token && { authorization: `Bearer ${token}` }),
    },
    body,
  });
}

/** A signed-in page's socket: every frame it got, in order. */
async function connect(): Promise<{ ws: WebSocket; frames: Record<string, unknown>[] }> {
  const ws = new WebSocket(`${gw.url.replace("http", "ws")}/ws`, [
    "keel.v1",
    `keel.token.${gw.controlToken}`,
  ]);
  const frames: Record<string, unknown>[] = [];
  ws.on("message", (data) => frames.push(JSON.parse(String(data)) as Record<string, unknown>));
  await new Promise<void>((resolve, reject) => {
    ws.once("open", () => resolve());
    ws.once("error", reject);
  });
  ws.send(JSON.stringify({ type: "open", conversation_id: CONVERSATION, after_seq: 0 }));
  return { ws, frames };
}

describe("web chat attachments", () => {
  it("an uploaded image goes to the model with the message, and the event names it", async () => {
    const response = await upload(PNG);
    expect(response.status).toBe(201);
    const { id, size } = (await response.json()) as { id: string; size: number };
    expect(size).toBe(PNG.length);

    const { ws, frames } = await connect();
    ws.send(
      JSON.stringify({
        type: "send",
        conversation_id: CONVERSATION,
        client_id: "client-0001",
        text: "what is this?",
        attachments: [{ upload_id: id, name: "shot.png", mime: "image/png", size }],
      }),
    );
    await waitFor(() => frames.some((f) => f.type === "event" && f.kind === "reply"), {
      message: "the reply event",
    });
    ws.close();
    expect(imagePartsOf(model.requests.at(-1)!)).toEqual([
      `data:image/png;base64,${PNG.toString("base64")}`,
    ]);
    expect(lastUserText(model.requests.at(-1)!)).toContain("what is this?");
    const user = frames.find((f) => f.type === "event" && f.kind === "user");
    expect(user?.attachments).toEqual([{ name: "shot.png", mime: "image/png" }]);
  });

  it("refuses uploads without a credential, and over the size limit", async () => {
    expect((await upload(PNG, null)).status).toBe(401);
    await gw.shutdown();
    writeFileSync(join(home.path, "config.yaml"), "platforms:\n  telegram: { max_file_mb: 2 }\n");
    gw = await startInProcessGateway({
      home: home.path,
      modelBaseUrl: model.baseUrl,
      env: { KEEL_WEBCHAT_ENABLED: "true" },
    });
    // Under max_file_mb: the upload route takes it (its own limit, not http.max_body_bytes).
    expect((await upload(Buffer.alloc(1_572_864, 1))).status).toBe(201);
    const tooBig = await upload(Buffer.alloc(3 * 1_048_576, 1));
    expect(tooBig.status).toBe(413);
    const { message } = ((await tooBig.json()) as { error: { message: string } }).error;
    expect(message).toContain("up to 2 MB");
    expect(message).toContain("platforms.telegram.max_file_mb");
    // Nothing half-written is left behind.
    expect(readdirSync(join(home.path, "uploads")).filter((f) => f.endsWith(".part"))).toEqual([]);
  });

  it("a send naming something that is not an upload id is refused as a bad frame", async () => {
    const { ws, frames } = await connect();
    ws.send(
      JSON.stringify({
        type: "send",
        conversation_id: CONVERSATION,
        client_id: "client-0002",
        text: "x",
        attachments: [{ upload_id: "../../state.db", name: "a", mime: "x", size: 1 }],
      }),
    );
    await waitFor(() => frames.some((f) => f.type === "error"), { message: "an error frame" });
    ws.close();
    expect(model.requests).toHaveLength(0);
  });
});
