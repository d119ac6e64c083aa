/**
 * Media through the OpenAI-compatible API and the file route: image parts in, files out as
 * authenticated links. A real gateway in this process against the stand-in model.
 */
import { existsSync, mkdirSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  defaultScript,
  type FakeOpenAI,
  imagePartsOf,
  lastUserText,
  startFakeOpenAI,
} from "../fakes/openai-server.js";
import { type InProcessGateway, startInProcessGateway } from "../helpers/in-process-gateway.js";
import { createTempDir } from "../helpers/temp-home.js";

const PNG_B64 =
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";

let model: FakeOpenAI;
let home: ReturnType<typeof createTempDir>;
let gw: InProcessGateway;

beforeEach(async () => {
  model = await startFakeOpenAI();
  home = createTempDir("keel-api-media-");
  gw = await startInProcessGateway({ home: home.path, modelBaseUrl: model.baseUrl });
});

afterEach(async () => {
  await gw.shutdown();
  await model.close();
  home.cleanup();
});

function chat(content: unknown) {
  return fetch(`${gw.url}/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${gw.controlToken}`, "content-type": "application/json" },
    body: JSON.stringify({ model: "keel", messages: [{ role: "user", content }] }),
  });
}

async function replyOf(response: Response): Promise<string> {
  expect(response.status).toBe(200);
  const body = (await response.json()) as { choices: { message: { content: string } }[] };
  return body.choices[0]!.message.content;
}

describe("image parts on /v1/chat/completions", () => {
  it("a data URL image reaches the model as an image part and is saved in the workspace", async () => {
    const url = `data:image/png;base64,${PNG_B64}`;
    const reply = await replyOf(
      await chat([
        { type: "text", text: "describe" },
        { type: "image_url", image_url: { url } },
      ]),
    );
    expect(reply).toContain("describe");
    expect(imagePartsOf(model.requests.at(-1)!)).toEqual([url]);
    const inbox = join(home.path, "workspace", "inbox");
    const saved = readdirSync(inbox).flatMap((s) => readdirSync(join(inbox, s)));
    expect(saved).toEqual([expect.stringMatching(/image-1\.png$/)]);
  });

  it("an https image URL is passed to the model as it is", async () => {
    const url = "https://example.com/cat.jpg";
    await replyOf(await chat([{ type: "image_url", image_url: { url } }]));
    expect(imagePartsOf(model.requests.at(-1)!)).toEqual([url]);
  });

  it("an image URL Keel does not take is a 400 naming the part, and nothing runs", async () => {
    const response = await chat([
      { type: "text", text: "x" },
      { type: "image_url", image_url: { url: "http://192.168.1.1/secret.png" } },
    ]);
    expect(response.status).toBe(400);
    const body = (await response.json()) as { error: { message: string } };
    expect(body.error.message).toContain("content part 1");
    expect(model.requests).toHaveLength(0);
  });
});

describe("files the agent sends, over the API", () => {
  it("the reply links an authenticated /files/<id> URL that serves the file", async () => {
    const workspace = join(home.path, "workspace");
    mkdirSync(workspace, { recursive: true });
    writeFileSync(join(workspace, "report.csv"), "a,b\n1,2\n");
    model.script((request) =>
      request.messages.at(-1)?.role === "tool"
        ? { text: "Here is the report." }
        : lastUserText(request) === "send the report"
          ? { toolCalls: [{ name: "send_file", arguments: { path: "report.csv" } }] }
          : defaultScript(request),
    );
    const reply = await replyOf(await chat("send the report"));
    const link = /\[report\.csv\]\((\/files\/[0-9a-f-]{36})\)/.exec(reply);
    expect(link, reply).not.toBeNull();
    expect(reply.startsWith("Here is the report.")).toBe(true);

    const served = await fetch(`${gw.url}${link![1]}`, {
      headers: { authorization: `Bearer ${gw.controlToken}` },
    });
    expect(served.status).toBe(200);
    expect(served.headers.get("content-disposition")).toContain("attachment");
    expect(await served.text()).toBe("a,b\n1,2\n");
    // The copy is what was sent, even when the agent changes its file afterwards.
    writeFileSync(join(workspace, "report.csv"), "changed");
    const again = await fetch(`${gw.url}${link![1]}`, {
      headers: { authorization: `Bearer ${gw.controlToken}` },
    });
    expect(await again.text()).toBe("a,b\n1,2\n");

    expect((await fetch(`${gw.url}${link![1]}`)).status).toBe(401);
    const unknown = await fetch(`${gw.url}/files/00000000-0000-0000-0000-000000000000`, {
      headers: { authorization: `Bearer ${gw.controlToken}` },
    });
    expect(unknown.status).toBe(404);
    expect(existsSync(join(home.path, "files"))).toBe(true);
  });
});
