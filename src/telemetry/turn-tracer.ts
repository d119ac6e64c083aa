/**
 * OpenTelemetry traces of turns, exported over OTLP/HTTP (JSON) when `telemetry.otlp_endpoint`
 * is set. The SDK is imported only then (`loadTurnTracer`): a gateway without the setting loads
 * none of it (`createTurnTracer`). One trace per turn, built from events the parts already emit:
 *
 *   keel.turn                      turn_start … turn_end
 *   ├─ keel.intake                 the message accepted … its turn started
 *   ├─ chat <model>                each model call (GenAI semantic conventions)
 *   ├─ execute_tool <tool>         each tool call
 *   └─ keel.delivery               each send of the turn's reply to its platform
 */
import type { Context, Span, SpanContext, Tracer } from "@opentelemetry/api";
import type { ModelAttempt } from "../agent/model-chain.js";
import type { RunnerEvent } from "../contract/platform.js";
import type { DeliveryReport } from "../runner/outbox-dispatcher.js";

/** Ended turns whose delivery may still come, remembered so it joins their trace. */
const ENDED_TURNS_KEPT = 1_000;

export interface TurnTracer {
  onRunnerEvent(event: RunnerEvent): void;
  onModelAttempt(attempt: ModelAttempt, sessionId: string | undefined): void;
  onDelivery(report: DeliveryReport): void;
  /** Sends what is buffered and stops the exporter. */
  shutdown(): Promise<void>;
}

export interface TurnTracerOptions {
  /** The collector's OTLP/HTTP endpoint (`/v1/traces` is added unless it ends with it). */
  endpoint: string;
  version: string;
  /** The clock the turns are timed with (epoch ms). */
  now: () => number;
  /** The platform a session key belongs to (a bounded name, as the metrics label it). */
  platformOf(sessionKey: string): string;
}

/** The traces' URL for an endpoint given as the collector's base or as its traces URL. */
export function tracesUrl(endpoint: string): string {
  const trimmed = endpoint.replace(/\/+$/, "");
  return trimmed.endsWith("/v1/traces") ? trimmed : `${trimmed}/v1/traces`;
}

/** What arrives while the SDK loads, kept (with its time) to be traced once it has. */
type Pending = (traces: TurnTraces) => void;
const PENDING_KEPT = 10_000;

/**
 * Starts loading the SDK and the exporter (only now) and returns the tracer at once: events that
 * come before the SDK is loaded are traced when it is, at the times they happened. A failed load
 * is reported to `onError` and tracing stays off.
 */
export function createTurnTracer(
  options: TurnTracerOptions,
  onError: (err: unknown) => void,
): TurnTracer {
  let traces: TurnTraces | null = null;
  let pending: Pending[] | null = [];
  const loaded = loadSdk(options).then(
    (sdk) => {
      traces = sdk.traces;
      for (const replay of pending ?? []) guard(() => replay(sdk.traces));
      pending = null;
      return sdk;
    },
    (err: unknown) => {
      pending = null;
      onError(err);
      return null;
    },
  );
  const run = (fn: Pending) => {
    if (traces) guard(() => fn(traces!));
    else if (pending && pending.length < PENDING_KEPT) pending.push(fn);
  };
  return {
    onRunnerEvent: (event) => {
      const at = options.now();
      run((t) => t.onRunnerEvent(event, at));
    },
    onModelAttempt: (attempt, sessionId) => {
      const at = options.now();
      run((t) => t.onModelAttempt(attempt, sessionId, at));
    },
    onDelivery: (report) => run((t) => t.onDelivery(report)),
    shutdown: async () => {
      await (await loaded)?.provider.shutdown();
    },
  };
}

async function loadSdk(options: TurnTracerOptions) {
  const [api, sdk, exporter, resources] = await Promise.all([
    import("@opentelemetry/api"),
    import("@opentelemetry/sdk-trace"),
    import("@opentelemetry/exporter-trace-otlp-http"),
    import("@opentelemetry/resources"),
  ]);
  const provider = new sdk.TracerProvider({
    resource: resources.resourceFromAttributes({
      "service.name": "keel",
      "service.version": options.version,
    }),
    spanProcessors: [
      new sdk.BatchSpanProcessor({
        exporter: new exporter.OTLPTraceExporter({ url: tracesUrl(options.endpoint) }),
        // Turns are few and slow: a second's wait costs nothing and keeps traces timely.
        scheduledDelayMillis: 1000,
      }),
    ],
  });
  const tracer = provider.getTracer("keel", options.version);
  const childOf = (parent: SpanContext) => api.trace.setSpanContext(api.ROOT_CONTEXT, parent);
  const traces = new TurnTraces(tracer, childOf, options, {
    error: api.SpanStatusCode.ERROR,
    client: api.SpanKind.CLIENT,
  });
  return { provider, traces };
}

/** Tracing must never break what it watches. */
function guard(fn: () => void): void {
  try {
    fn();
  } catch {
    // A span that could not be recorded is a gap in a trace, nothing more.
  }
}

interface Codes {
  error: number;
  client: number;
}

class TurnTraces {
  /** Running turns by transcript (model calls name the transcript, not the turn). */
  private readonly bySession = new Map<string, Span>();
  private readonly byTurn = new Map<number, SpanContext>();
  private readonly tools = new Map<string, Span>();

  constructor(
    private readonly tracer: Tracer,
    private readonly childOf: (parent: SpanContext) => Context,
    private readonly options: TurnTracerOptions,
    private readonly codes: Codes,
  ) {}

  onRunnerEvent(event: RunnerEvent, at: number): void {
    if (event.type === "refused") return;
    const turn = this.bySession.get(event.sessionId);
    switch (event.type) {
      case "turn_start": {
        const startedAt = at;
        const span = this.tracer.startSpan("keel.turn", {
          startTime: startedAt,
          attributes: {
            "keel.platform": this.options.platformOf(event.sessionKey),
            "keel.session_id": event.sessionId,
            "keel.turn_id": event.turnId,
            "keel.turn.resume": event.resume,
          },
        });
        this.bySession.set(event.sessionId, span);
        this.remember(event.turnId, span.spanContext());
        if (event.receivedAt !== undefined) {
          this.tracer
            .startSpan(
              "keel.intake",
              { startTime: Math.min(event.receivedAt, startedAt) },
              this.childOf(span.spanContext()),
            )
            .end(startedAt);
        }
        return;
      }
      case "tool_start": {
        if (!turn) return;
        const span = this.tracer.startSpan(
          `execute_tool ${event.name}`,
          {
            startTime: at,
            attributes: {
              "gen_ai.operation.name": "execute_tool",
              "gen_ai.tool.name": event.name,
              "gen_ai.tool.call.id": event.toolCallId,
            },
          },
          this.childOf(turn.spanContext()),
        );
        this.tools.set(`${event.sessionId}/${event.toolCallId}`, span);
        return;
      }
      case "tool_end": {
        const key = `${event.sessionId}/${event.toolCallId}`;
        const span = this.tools.get(key);
        if (!span) return;
        this.tools.delete(key);
        if (event.isError) span.setStatus({ code: this.codes.error });
        span.end(at);
        return;
      }
      case "turn_end": {
        if (!turn) return;
        this.bySession.delete(event.sessionId);
        turn.setAttribute("keel.stop_reason", event.stopReason);
        if (event.usage) {
          turn.setAttribute("gen_ai.usage.input_tokens", event.usage.promptTokens);
          turn.setAttribute("gen_ai.usage.output_tokens", event.usage.completionTokens);
        }
        if (event.stopReason === "error") turn.setStatus({ code: this.codes.error });
        // Tool calls the turn left open (aborted) end with it.
        for (const [key, span] of this.tools) {
          if (key.startsWith(`${event.sessionId}/`)) {
            span.end(at);
            this.tools.delete(key);
          }
        }
        turn.end(at);
        return;
      }
    }
  }

  onModelAttempt(attempt: ModelAttempt, sessionId: string | undefined, endedAt: number): void {
    const turn = sessionId ? this.bySession.get(sessionId) : undefined;
    const attributes: Record<string, string | number> = {
      "gen_ai.operation.name": "chat",
      // Keel speaks the OpenAI chat completions protocol to every model endpoint.
      "gen_ai.system": "openai",
      "gen_ai.request.model": attempt.model,
      "keel.model.attempt": attempt.attempt,
    };
    if (attempt.usage) {
      attributes["gen_ai.usage.input_tokens"] = attempt.usage.promptTokens;
      attributes["gen_ai.usage.output_tokens"] = attempt.usage.completionTokens;
    }
    if (attempt.outcome !== "ok") attributes["error.type"] = attempt.outcome;
    const span = this.tracer.startSpan(
      `chat ${attempt.model}`,
      { kind: this.codes.client, startTime: endedAt - (attempt.durationMs ?? 0), attributes },
      turn && this.childOf(turn.spanContext()),
    );
    if (attempt.outcome !== "ok")
      span.setStatus({ code: this.codes.error, message: attempt.error ?? attempt.outcome });
    span.end(endedAt);
  }

  onDelivery(report: DeliveryReport): void {
    const parent = report.turnId === null ? undefined : this.byTurn.get(report.turnId);
    const span = this.tracer.startSpan(
      "keel.delivery",
      {
        startTime: report.startedAt,
        attributes: { "keel.platform": report.platform, "keel.delivery.kind": report.kind },
      },
      parent && this.childOf(parent),
    );
    if (report.error !== undefined)
      span.setStatus({ code: this.codes.error, message: report.error });
    span.end(report.endedAt);
  }

  private remember(turnId: number, context: SpanContext): void {
    this.byTurn.set(turnId, context);
    if (this.byTurn.size > ENDED_TURNS_KEPT) {
      const oldest = this.byTurn.keys().next().value;
      if (oldest !== undefined) this.byTurn.delete(oldest);
    }
  }
}
