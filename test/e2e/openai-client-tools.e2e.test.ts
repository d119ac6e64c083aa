/**
 * A client's functions across a crash, with the built `keel gateway run` as a real process and
 * the official `openai` client as an application uses it (no Keel headers): the model calls the
 * client's function, the gateway answers with `tool_calls`, and is SIGKILLed before the client
 * sends the result. The next process takes the client's request carrying the result, and the
 * same journaled conversation goes on in the same session. Needs `npm run build`.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import OpenAI from "openai";
import { afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import {
  defaultScript,
  type FakeChatRequest,
  type FakeOpenAI,
  startFakeOpenAI,
} from "../fakes/openai-server.js";
import { type GatewayProcess, isBuilt, startGatewayProcess } from "../helpers/gateway-process.js";

const KEY = "e2e-client-tools-api-key";

let fake: FakeOpenAI;
let home: string;
let gateways: GatewayProcess[] = [];

beforeAll(() => {
  if (!isBuilt()) throw new Error("run `npm run build` first: these tests start bin/keel.js");
});

beforeEach(async () => {
  fake = await startFakeOpenAI();
  home = mkdtempSync(join(tmpdir(), "keel-e2e-client-tools-"));
});

afterEach(async () => {
  await Promise.all(gateways.map((g) => g.stop()));
  gateways = [];
  await fake.close();
  rmSync(home, { recursive: true, force: true });
});

async function startGateway(): Promise<GatewayProcess> {
  const gateway = await startGatewayProcess({
    home,
    env: { OPENAI_BASE_URL: fake.baseUrl, KEEL_MODEL: "fake-model", KEEL_API_KEY: KEY },
  });
  gateways.push(gateway);
  await gateway.waitForReady();
  return gateway;
}

function clientOf(gateway: GatewayProcess): OpenAI {
  return new OpenAI({ baseURL: `${gateway.baseUrl}/v1`, apiKey: KEY, maxRetries: 0 });
}

const WEATHER = {
  type: "function" as const,
  function: {
    name: "get_weather",
    parameters: { type: "object", properties: { city: { type: "string" } } },
  },
};

function weatherModel(request: FakeChatRequest) {
  const last = request.messages.at(-1)!;
  if (last.role === "tool") return { text: `Forecast: ${String(last.content)}.` };
  if (last.role === "user" && String(last.content).startsWith("weather in ")) {
    return {
      toolCalls: [{ id: "call_weather_1", name: "get_weather", arguments: { city: "Lyon" } }],
    };
  }
  return defaultScript(request);
}

describe("client tools across a SIGKILL", () => {
  it("the result sent to the next process continues the same session's turn", async () => {
    fake.script(weatherModel);
    const first = await startGateway();
    const messages: OpenAI.Chat.ChatCompletionMessageParam[] = [
      { role: "user", content: "weather in Lyon" },
    ];
    const asked = await clientOf(first).chat.completions.create({
      model: "fake-model",
      messages,
      tools: [WEATHER],
    });
    expect(asked.choices[0]!.finish_reason).toBe("tool_calls");
    first.kill("SIGKILL");
    await first.waitForExit();

    const second = await startGateway();
    messages.push(asked.choices[0]!.message, {
      role: "tool",
      tool_call_id: "call_weather_1",
      content: "rain at noon",
    });
    const answered = await clientOf(second).chat.completions.create({
      model: "fake-model",
      messages,
      tools: [WEATHER],
    });
    expect(answered.choices[0]!.message.content).toBe("Forecast: rain at noon.");
    // One model call before the crash, one after: the transcript the second saw holds the call.
    expect(fake.requests).toHaveLength(2);
    const seen = fake.requests[1]!.messages;
    expect(seen.filter((m) => m.role === "user")).toHaveLength(1);
    expect(seen.at(-2)?.tool_calls?.[0]?.id).toBe("call_weather_1");
    expect(seen.at(-1)).toMatchObject({ role: "tool", tool_call_id: "call_weather_1" });

    const sessions = await second.control("/api/sessions");
    expect(((await sessions.json()) as { sessions: unknown[] }).sessions).toHaveLength(1);
  });
});
