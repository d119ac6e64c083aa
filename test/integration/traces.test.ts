/**
 * Traces of a turn with a tool call, exported over OTLP/HTTP to a stand-in collector: one trace,
 * the turn at its root, and under it the intake, each model call (with the GenAI attributes),
 * the tool call and the delivery of the reply.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { type FakeOpenAI, startFakeOpenAI } from "../fakes/openai-server.js";
import { type OtlpReceiver, type ReceivedSpan, startOtlpReceiver } from "../fakes/otlp-receiver.js";
import { type InProcessGateway, startInProcessGateway } from "../helpers/in-process-gateway.js";
import { createTempDir } from "../helpers/temp-home.js";
import { waitFor } from "../helpers/wait-for.js";

let fake: FakeOpenAI;
let collector: OtlpReceiver;
let home: { path: string; cleanup(): void };
let harness: InProcessGateway | undefined;

beforeEach(async () => {
  fake = await startFakeOpenAI();
  collector = await startOtlpReceiver();
  home = createTempDir("keel-traces-it-");
});

afterEach(async () => {
  await harness?.shutdown();
  harness = undefined;
  await collector.close();
  await fake.close();
  home.cleanup();
});

describe("traces over OTLP/HTTP", () => {
  it("sends one trace per turn: intake, model calls, the tool call and the delivery under the turn", async () => {
    harness = await startInProcessGateway({
      home: home.path,
      modelBaseUrl: fake.baseUrl,
      env: { KEEL_OTLP_ENDPOINT: collector.baseUrl },
    });
    await harness.send("run: echo traced");
    await waitFor(() => harness!.platform.texts().includes("ran: traced"), {
      timeoutMs: 15_000,
      message: "the reply",
    });
    const spans = await waitFor(
      () => {
        const names = collector.spans.map((s) => s.name);
        return names.includes("keel.delivery") && names.includes("keel.turn")
          ? collector.spans
          : null;
      },
      { timeoutMs: 15_000, intervalMs: 100, message: "the turn's spans at the collector" },
    );
    const one = (name: string): ReceivedSpan => {
      const found = spans.filter((s) => s.name === name);
      expect(found, name).toHaveLength(1);
      return found[0]!;
    };
    const turn = one("keel.turn");
    expect(turn.parentSpanId).toBe("");
    expect(turn.attributes["keel.platform"]).toBe("test");
    expect(turn.attributes["keel.stop_reason"]).toBe("stop");
    expect(turn.resource["service.name"]).toBe("keel");
    const intake = one("keel.intake");
    const tool = one("execute_tool terminal");
    const delivery = one("keel.delivery");
    const models = spans.filter((s) => s.name === "chat fake-model");
    expect(models).toHaveLength(2);
    for (const child of [intake, tool, delivery, ...models]) {
      expect(child.traceId).toBe(turn.traceId);
      expect(child.parentSpanId).toBe(turn.spanId);
    }
    expect(tool.attributes["gen_ai.tool.name"]).toBe("terminal");
    for (const model of models) {
      expect(model.attributes).toMatchObject({
        "gen_ai.operation.name": "chat",
        "gen_ai.system": "openai",
        "gen_ai.request.model": "fake-model",
      });
      expect(model.attributes["gen_ai.usage.input_tokens"]).toBeGreaterThan(0);
      expect(model.attributes["gen_ai.usage.output_tokens"]).toBeGreaterThan(0);
    }
    // In order: intake before the turn's work, the tool between the two model calls.
    const [first, second] = models.sort((a, b) => (a.startNs < b.startNs ? -1 : 1));
    expect(intake.endNs).toBeLessThanOrEqual(first!.startNs);
    expect(tool.startNs).toBeGreaterThanOrEqual(first!.endNs);
    expect(tool.endNs).toBeLessThanOrEqual(second!.startNs);
    expect(delivery.attributes["keel.platform"]).toBe("test");
    expect(collector.rejected).toBe(0);
  });
});
