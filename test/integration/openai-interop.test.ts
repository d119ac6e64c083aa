/**
 * Stock OpenAI clients against `/v1`: the official `openai` npm client as applications use it
 * (default options, no Keel headers) and the Vercel AI SDK (`ai` with `@ai-sdk/openai`), against a real gateway in this process and the stand-in
 * model. What a client parses must be OpenAI's dialect: its routes, its error shape (each error
 * surfaces as the client's APIError with the right status and code), its refusals.
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { createOpenAI } from "@ai-sdk/openai";
import { generateText, streamText } from "ai";
import OpenAI from "openai";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config/load-config.js";
import type { Config } from "../../src/config/schema.js";
import type { Gateway } from "../../src/gateway/gateway.js";
import {
  defaultScript,
  type FakeChatRequest,
  type FakeOpenAI,
  lastUserText,
  startFakeOpenAI,
} from "../fakes/openai-server.js";
import { createTestGateway, stopTestGateway } from "../helpers/in-process-gateway.js";
import { createTempDir } from "../helpers/temp-home.js";
import { waitFor } from "../helpers/wait-for.js";

interface Harness {
  gateway: Gateway;
  config: Config;
  baseUrl: string;
  client: OpenAI;
}

let fake: FakeOpenAI;
let home: { path: string; cleanup(): void };
let harness: Harness | undefined;

beforeEach(async () => {
  fake = await startFakeOpenAI();
  home = createTempDir("keel-interop-");
});

afterEach(async () => {
  await stopTestGateway(harness?.gateway);
  harness = undefined;
  await fake.close();
  home.cleanup();
});

async function start(yaml?: string): Promise<Harness> {
  if (yaml) writeFileSync(join(home.path, "config.yaml"), yaml);
  const { config } = loadConfig({
    home: home.path,
    env: { KEEL_HTTP_PORT: "0", OPENAI_BASE_URL: fake.baseUrl, KEEL_MODEL: "fake-model" },
  });
  const gateway = createTestGateway(config);
  await gateway.start();
  const baseUrl = `http://127.0.0.1:${gateway.port}`;
  const client = new OpenAI({
    baseURL: `${baseUrl}/v1`,
    apiKey: config.controlToken,
    maxRetries: 0,
  });
  harness = { gateway, config, baseUrl, client };
  return harness;
}

/** The client's rejection, as the APIError it must be. */
async function apiErrorOf(
  promise: Promise<unknown>,
): Promise<InstanceType<typeof OpenAI.APIError>> {
  const err = await promise.then(
    () => null,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(OpenAI.APIError);
  return err as InstanceType<typeof OpenAI.APIError>;
}

describe("models", () => {
  it("lists the model and retrieves it by id; an unknown id is the client's NotFoundError", async () => {
    const h = await start();
    const list = await h.client.models.list();
    expect(list.data.map((m) => m.id)).toEqual(["fake-model"]);
    const model = await h.client.models.retrieve("fake-model");
    expect(model).toMatchObject({ id: "fake-model", object: "model", owned_by: "keel" });

    const err = await apiErrorOf(h.client.models.retrieve("gpt-9"));
    expect(err).toBeInstanceOf(OpenAI.NotFoundError);
    expect(err.code).toBe("model_not_found");
    expect(err.message).toMatch(/gpt-9/);
  });
});

describe("errors in OpenAI's shape, parsed by the client", () => {
  it("a wrong key is the client's AuthenticationError (401, invalid_api_key)", async () => {
    const h = await start();
    const wrong = new OpenAI({ baseURL: `${h.baseUrl}/v1`, apiKey: "wrong", maxRetries: 0 });
    const err = await apiErrorOf(wrong.models.list());
    expect(err).toBeInstanceOf(OpenAI.AuthenticationError);
    expect(err.status).toBe(401);
    expect(err.code).toBe("invalid_api_key");
  });

  it("n > 1 is a 400 naming the parameter; nothing reaches the model", async () => {
    const h = await start();
    const err = await apiErrorOf(
      h.client.chat.completions.create({
        model: "fake-model",
        n: 2,
        messages: [{ role: "user", content: "echo: twice" }],
      }),
    );
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    expect(err.param).toBe("n");
    expect(err.message).toMatch(/n must be 1/);
    expect(fake.requests).toHaveLength(0);
  });

  it("a body over http.max_body_bytes is a 413 in OpenAI's shape that names the setting", async () => {
    const h = await start("http:\n  max_body_bytes: 4096\n");
    const err = await apiErrorOf(
      h.client.chat.completions.create({
        model: "fake-model",
        messages: [{ role: "user", content: `echo: ${"x".repeat(8000)}` }],
      }),
    );
    expect(err.status).toBe(413);
    expect(err.type).toBe("invalid_request_error");
    expect(err.code).toBe("body_too_large");
    expect(err.message).toMatch(/http\.max_body_bytes/);
  });

  it("an unknown /v1 route is a 404 and a wrong method a 405, both in OpenAI's shape", async () => {
    const h = await start();
    const auth = { authorization: `Bearer ${h.config.controlToken}` };
    const missing = await fetch(`${h.baseUrl}/v1/embeddings`, { method: "POST", headers: auth });
    expect(missing.status).toBe(404);
    expect(await missing.json()).toEqual({
      error: {
        message: "No route for POST /v1/embeddings.",
        type: "invalid_request_error",
        param: null,
        code: "not_found",
      },
    });
    const wrongMethod = await fetch(`${h.baseUrl}/v1/chat/completions`, { headers: auth });
    expect(wrongMethod.status).toBe(405);
    expect(wrongMethod.headers.get("allow")).toBe("POST");
    const body = (await wrongMethod.json()) as { error: Record<string, unknown> };
    expect(body.error).toMatchObject({ type: "invalid_request_error", code: "method_not_allowed" });
  });
});

describe("body limit for images", () => {
  it("by default a request with a 6 MiB photo is taken (http.max_body_bytes defaults to 20 MiB)", async () => {
    const h = await start();
    const photo = Buffer.alloc(6 * 1_048_576, 7).toString("base64");
    const done = await h.client.chat.completions.create({
      model: "fake-model",
      messages: [
        {
          role: "user",
          content: [
            { type: "text", text: "echo: got it" },
            { type: "image_url", image_url: { url: `data:image/jpeg;base64,${photo}` } },
          ],
        },
      ],
    });
    expect(done.choices[0]!.message.content).toContain("got it");
  });
});

/** The client's function of these tests, in OpenAI's `tools` format. */
const WEATHER = {
  type: "function" as const,
  function: {
    name: "get_weather",
    description: "The weather in a city.",
    parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
  },
};

/**
 * The model: asked about the weather, it calls the client's `get_weather`; given its result, it
 * answers with it. Anything else: the default phrases.
 */
function weatherModel(request: FakeChatRequest) {
  const last = request.messages.at(-1)!;
  if (last.role === "tool" && last.tool_call_id?.startsWith("call_weather")) {
    return { text: `It is ${String(last.content)} there.` };
  }
  if (last.role === "user" && lastUserText(request).startsWith("weather in ")) {
    const city = lastUserText(request).slice("weather in ".length);
    return {
      toolCalls: [{ id: `call_weather_${city}`, name: "get_weather", arguments: { city } }],
    };
  }
  return defaultScript(request);
}

async function sessionCount(h: Harness): Promise<number> {
  const res = await fetch(`${h.baseUrl}/api/sessions`, {
    headers: { authorization: `Bearer ${h.config.controlToken}` },
  });
  return ((await res.json()) as { sessions: unknown[] }).sessions.length;
}

describe("client-defined tools", () => {
  it("are offered beside Keel's; a call ends the answer with tool_calls, and the results continue the same session", async () => {
    const h = await start();
    fake.script(weatherModel);
    const messages: OpenAI.Chat.ChatCompletionMessageParam[] = [
      { role: "user", content: "weather in Paris" },
    ];
    const first = await h.client.chat.completions.create({
      model: "fake-model",
      messages,
      tools: [WEATHER],
    });
    const choice = first.choices[0]!;
    expect(choice.finish_reason).toBe("tool_calls");
    expect(choice.message.tool_calls).toEqual([
      {
        id: "call_weather_Paris",
        type: "function",
        function: { name: "get_weather", arguments: '{"city":"Paris"}' },
      },
    ]);
    const offered = (fake.requests[0]!.tools ?? []).map((t) => t.function.name);
    expect(offered).toContain("get_weather");
    expect(offered).toContain("terminal");

    messages.push(choice.message, {
      role: "tool",
      tool_call_id: "call_weather_Paris",
      content: "sunny, 21 °C",
    });
    const second = await h.client.chat.completions.create({
      model: "fake-model",
      messages,
      tools: [WEATHER],
    });
    expect(second.choices[0]!.finish_reason).toBe("stop");
    expect(second.choices[0]!.message.content).toBe("It is sunny, 21 °C there.");
    // The model saw its call and the client's result in one transcript, in one session.
    const seen = fake.requests[1]!.messages.map((m) => m.role);
    expect(seen.slice(-3)).toEqual(["user", "assistant", "tool"]);
    expect(await sessionCount(h)).toBe(1);
  });

  it("streamed: the call arrives as tool_calls deltas with finish_reason tool_calls", async () => {
    const h = await start();
    fake.script(weatherModel);
    const messages: OpenAI.Chat.ChatCompletionMessageParam[] = [
      { role: "user", content: "weather in Oslo" },
    ];
    const stream = h.client.chat.completions.stream({
      model: "fake-model",
      messages,
      tools: [WEATHER],
    });
    const first = await stream.finalChatCompletion();
    expect(first.choices[0]!.finish_reason).toBe("tool_calls");
    const call = first.choices[0]!.message.tool_calls![0]!;
    expect(call.type === "function" && call.function).toEqual({
      name: "get_weather",
      arguments: '{"city":"Oslo"}',
    });
    messages.push(first.choices[0]!.message, {
      role: "tool",
      tool_call_id: call.id,
      content: "snowing",
    });
    const second = await h.client.chat.completions
      .stream({ model: "fake-model", messages, tools: [WEATHER] })
      .finalChatCompletion();
    expect(second.choices[0]!.message.content).toBe("It is snowing there.");
    expect(await sessionCount(h)).toBe(1);
  });

  it("a result for a call nobody made is a 400 naming it; nothing reaches the model", async () => {
    const h = await start();
    const err = await apiErrorOf(
      h.client.chat.completions.create({
        model: "fake-model",
        messages: [
          { role: "user", content: "weather in Rome" },
          {
            role: "assistant",
            content: null,
            tool_calls: [
              {
                id: "call_x",
                type: "function",
                function: { name: "get_weather", arguments: "{}" },
              },
            ],
          },
          { role: "tool", tool_call_id: "call_x", content: "hot" },
        ],
        tools: [WEATHER],
      }),
    );
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    expect(err.message).toMatch(/call_x answers no tool call waiting/);
    expect(fake.requests).toHaveLength(0);
  });
});

describe("stateless clients", () => {
  it("twenty calls that each resend the conversation make one session", async () => {
    const h = await start();
    const messages: OpenAI.Chat.ChatCompletionMessageParam[] = [];
    for (let i = 1; i <= 20; i++) {
      messages.push({ role: "user", content: `echo: turn ${i}` });
      const done = await h.client.chat.completions.create({ model: "fake-model", messages });
      const text = done.choices[0]!.message.content;
      expect(text).toBe(`turn ${i}`);
      messages.push({ role: "assistant", content: text });
    }
    expect(await sessionCount(h)).toBe(1);
    // Each turn's model call saw the whole conversation once, not the history stacked again.
    const last = fake.requests.at(-1)!.messages.filter((m) => m.role === "user");
    expect(last).toHaveLength(20);
  });

  it("a conversation whose earlier answer differs, or a new one, starts its own session", async () => {
    const h = await start();
    const first = await h.client.chat.completions.create({
      model: "fake-model",
      messages: [{ role: "user", content: "echo: a" }],
    });
    expect(first.choices[0]!.message.content).toBe("a");
    // Same question, but an answer this gateway never gave: another conversation.
    await h.client.chat.completions.create({
      model: "fake-model",
      messages: [
        { role: "user", content: "echo: a" },
        { role: "assistant", content: "something else" },
        { role: "user", content: "echo: b" },
      ],
    });
    await h.client.chat.completions.create({
      model: "fake-model",
      messages: [{ role: "user", content: "echo: a" }],
    });
    expect(await sessionCount(h)).toBe(3);
  });
});

/** The pending approval's id, once one waits. */
async function pendingApproval(h: Harness): Promise<string> {
  const auth = { authorization: `Bearer ${h.config.controlToken}` };
  let id: string | undefined;
  await waitFor(
    async () => {
      const res = await fetch(`${h.baseUrl}/api/approvals`, { headers: auth });
      id = ((await res.json()) as { approvals: { id: string }[] }).approvals[0]?.id;
      return id !== undefined;
    },
    { message: "a pending approval" },
  );
  return id!;
}

async function approve(h: Harness, id: string): Promise<void> {
  const res = await fetch(`${h.baseUrl}/api/approvals/${id}`, {
    method: "POST",
    headers: {
      authorization: `Bearer ${h.config.controlToken}`,
      "content-type": "application/json",
    },
    body: JSON.stringify({ decision: "approve" }),
  });
  expect(res.status).toBe(200);
}

describe("a turn that waits for approval answers the request that asked", () => {
  const command = "run: rm -rf ./scratch && echo removed";

  it("not streamed: the request stays open until the approval is answered, then gets the turn's result", async () => {
    const h = await start();
    const answer = h.client.chat.completions.create({
      model: "fake-model",
      messages: [{ role: "user", content: command }],
    });
    await approve(h, await pendingApproval(h));
    const done = await answer;
    expect(done.choices[0]!.finish_reason).toBe("stop");
    expect(done.choices[0]!.message.content).toBe("ran: removed");
  });

  it("streamed: the question arrives as a chunk, and the continuation follows in the same stream", async () => {
    const h = await start();
    const stream = await h.client.chat.completions.create({
      model: "fake-model",
      stream: true,
      messages: [{ role: "user", content: command }],
    });
    let text = "";
    let finish: string | null = null;
    for await (const chunk of stream) {
      const piece = chunk.choices[0]?.delta?.content ?? "";
      text += piece;
      if (piece.includes("Approval needed")) await approve(h, await pendingApproval(h));
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
    expect(text).toMatch(/^⚠️ Approval needed \[\w+\]: terminal wants to run/);
    expect(text.endsWith("ran: removed")).toBe(true);
    expect(finish).toBe("stop");
  });
});

describe("the Responses API (POST /v1/responses)", () => {
  it("answers text input, and previous_response_id continues the same session", async () => {
    const h = await start();
    const first = await h.client.responses.create({ model: "fake-model", input: "echo: hello" });
    expect(first.status).toBe("completed");
    expect(first.output_text).toBe("hello");
    const second = await h.client.responses.create({
      model: "fake-model",
      input: "echo: again",
      previous_response_id: first.id,
    });
    expect(second.output_text).toBe("again");
    expect(await sessionCount(h)).toBe(1);
    // The second model call saw the first exchange.
    const users = fake.requests[1]!.messages.filter((m) => m.role === "user");
    expect(users.map((m) => m.content)).toEqual(["echo: hello", "echo: again"]);

    const unknown = await apiErrorOf(
      h.client.responses.create({
        model: "fake-model",
        input: "echo: x",
        previous_response_id: "resp_nope",
      }),
    );
    expect(unknown.status).toBe(404);
    expect(unknown.param).toBe("previous_response_id");
  });

  it("streams the Responses API's events, ending with response.completed", async () => {
    const h = await start();
    const stream = await h.client.responses.create({
      model: "fake-model",
      input: [{ role: "user", content: [{ type: "input_text", text: "echo: streamed words" }] }],
      stream: true,
    });
    const types: string[] = [];
    let text = "";
    let completed: OpenAI.Responses.Response | undefined;
    for await (const event of stream) {
      types.push(event.type);
      if (event.type === "response.output_text.delta") text += event.delta;
      if (event.type === "response.completed") completed = event.response;
    }
    expect(types[0]).toBe("response.created");
    expect(types).toContain("response.output_text.delta");
    expect(types.at(-1)).toBe("response.completed");
    expect(text).toBe("streamed words");
    expect(completed?.output_text ?? completed?.output).toBeTruthy();
  });

  it("takes an image as input_image", async () => {
    const h = await start();
    const png =
      "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";
    const done = await h.client.responses.create({
      model: "fake-model",
      input: [
        {
          role: "user",
          content: [
            { type: "input_text", text: "echo: a picture" },
            { type: "input_image", image_url: `data:image/png;base64,${png}`, detail: "auto" },
          ],
        },
      ],
    });
    expect(done.output_text).toContain("a picture");
    const parts = fake.requests[0]!.messages.at(-1)!.content as { type: string }[];
    expect(parts.map((p) => p.type)).toContain("image_url");
  });
});

describe("the Vercel AI SDK (@ai-sdk/openai, whose default is the Responses API)", () => {
  it("generateText and streamText get the agent's answer; previousResponseId continues the session", async () => {
    const h = await start();
    const provider = createOpenAI({ baseURL: `${h.baseUrl}/v1`, apiKey: h.config.controlToken });
    const first = await generateText({
      model: provider("fake-model"),
      prompt: "echo: from vercel",
    });
    expect(first.text).toBe("from vercel");
    const responseId = first.providerMetadata?.openai?.responseId as string;
    expect(responseId).toMatch(/^resp_/);

    const streamed = streamText({
      model: provider("fake-model"),
      prompt: "echo: streamed by vercel",
      providerOptions: { openai: { previousResponseId: responseId } },
    });
    let text = "";
    for await (const piece of streamed.textStream) text += piece;
    expect(text).toBe("streamed by vercel");
    expect(await sessionCount(h)).toBe(1);

    const chat = await generateText({
      model: provider.chat("fake-model"),
      prompt: "echo: through chat completions",
    });
    expect(chat.text).toBe("through chat completions");
  });
});
