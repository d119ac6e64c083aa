import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  defaultScript,
  type FakeOpenAI,
  imagePartsOf,
  startFakeOpenAI,
} from "../../test/fakes/openai-server.js";
import { createTempDir } from "../../test/helpers/temp-home.js";
import { RECENT_IMAGE_MESSAGES, resolveImages, withImageInput } from "./image-input.js";
import { createLlmClient } from "./llm-client.js";
import type { ChatMessage } from "./types.js";

describe("image input", () => {
  let dir: ReturnType<typeof createTempDir>;
  let model: FakeOpenAI;
  let image: string;

  beforeEach(async () => {
    dir = createTempDir();
    model = await startFakeOpenAI();
    image = join(dir.path, "cat.png");
    writeFileSync(image, "png");
  });
  afterEach(async () => {
    await model.close();
    dir.cleanup();
  });

  const photo = (text: string): ChatMessage => ({
    role: "user",
    content: [
      { type: "text", text },
      { type: "saved_image", path: image, mime: "image/png" },
    ],
  });
  const dataUrl = `data:image/png;base64,${Buffer.from("png").toString("base64")}`;

  it("sends only the most recent images as pixels, older ones as notes with the path", async () => {
    const history = Array.from({ length: RECENT_IMAGE_MESSAGES + 2 }, (_, i) => photo(`p${i}`));
    const resolved = await resolveImages(history, true);
    const kinds = resolved.map((m) =>
      m.role === "user" && typeof m.content !== "string" ? m.content[1]!.type : "",
    );
    expect(kinds).toEqual(["text", "text", "image_url", "image_url", "image_url"]);
    const old = resolved[0]!;
    expect(old.role === "user" && JSON.stringify(old.content)).toContain(`saved at ${image}`);
    expect(
      (await resolveImages(history, false)).some((m) => JSON.stringify(m).includes("data:")),
    ).toBe(false);
  });

  it("repeats a request without images when the endpoint refuses them, and remembers", async () => {
    let refusals = 0;
    model.script((request) => {
      if (imagePartsOf(request).length === 0) return defaultScript(request);
      refusals++;
      return { error: { status: 400, message: "Image input is not supported by this model" } };
    });
    const state = { refused: false };
    let told = 0;
    const llm = withImageInput(
      createLlmClient({ baseUrl: model.baseUrl, model: "m", timeoutMs: 10_000 }),
      { vision: true, state, onImagesRefused: () => told++ },
    );
    const ask = () =>
      llm.complete({
        messages: [photo("echo: hi")],
        tools: [],
        signal: new AbortController().signal,
      });
    const first = await ask();
    expect(first.ok).toBe(true);
    expect(model.requests.map((r) => imagePartsOf(r))).toEqual([[dataUrl], []]);
    await ask();
    expect(model.requests).toHaveLength(3);
    expect(imagePartsOf(model.requests[2]!)).toEqual([]);
    expect([refusals, told, state.refused]).toEqual([1, 1, true]);
  });

  it("passes other 400s through untouched", async () => {
    model.script({ error: { status: 400, message: "context length exceeded" } });
    const llm = withImageInput(
      createLlmClient({ baseUrl: model.baseUrl, model: "m", timeoutMs: 10_000 }),
      { vision: true, state: { refused: false } },
    );
    const result = await llm.complete({
      messages: [photo("x")],
      tools: [],
      signal: new AbortController().signal,
    });
    expect(result.ok).toBe(false);
    expect(model.requests).toHaveLength(1);
  });
});
