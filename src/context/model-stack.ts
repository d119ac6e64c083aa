/**
 * The model side of the agent, built once from the config: the chain of models (main model,
 * then `model.fallbacks`) with retries, each model's context window, a token gauge per
 * transcript, the latest attempts per transcript (for `/status`), and the per-turn
 * {@link ContextKeeper}.
 */
import type { Logger } from "pino";
import { createLlmClient } from "../agent/llm-client.js";
import {
  type BackoffPolicy,
  createModelChain,
  type ModelAttempt,
  type ModelChainRequest,
} from "../agent/model-chain.js";
import { ModelHealth } from "../agent/model-health.js";
import type { LlmResult } from "../agent/types.js";
import type { Config } from "../config/schema.js";
import { type CompactionSink, ContextKeeper } from "./context-keeper.js";
import { ContextWindows, type WindowSource } from "./context-window.js";
import { TokenGauge } from "./token-gauge.js";

/** Transcripts whose gauge and attempts are remembered (the oldest are forgotten first). */
const REMEMBERED_SESSIONS = 1_000;
const ATTEMPTS_KEPT = 8;

export interface ModelStackOptions {
  backoff?: BackoffPolicy;
  /** Told of every model call as it ends, with the transcript it was made for (metrics, traces). */
  onAttempt?: ModelAttemptObserver;
}

export type ModelAttemptObserver = (attempt: ModelAttempt, sessionId: string | undefined) => void;

export interface KeeperInput {
  sessionId: string;
  summary: string | null;
  sink: CompactionSink;
  preferred: string | null;
}

export class ModelStack {
  /** Main model first, then the fallbacks. */
  readonly models: readonly WindowSource[];
  readonly threshold: number;
  private readonly windows: ContextWindows;
  private readonly chain: ReturnType<typeof createModelChain>;
  private readonly gauges = new Map<string, TokenGauge>();
  private readonly attemptLog = new Map<string, ModelAttempt[]>();
  /** Since when every call has failed (for the alerts). */
  readonly health = new ModelHealth();

  constructor(config: Config, logger: Logger, options: ModelStackOptions = {}) {
    const { base_url, name, api_key, timeout_seconds } = config.model;
    if (!base_url || !name) throw new Error("ModelStack needs model.base_url and model.name");
    this.models = [
      { baseUrl: base_url, name, apiKey: api_key },
      ...config.model.fallbacks.map((f) => ({
        baseUrl: f.base_url,
        name: f.name,
        apiKey: f.api_key,
      })),
    ];
    this.threshold = config.agent.compaction.threshold;
    this.windows = new ContextWindows(config.model.context_window);
    this.chain = createModelChain({
      models: this.models.map((m) => ({
        name: m.name,
        client: createLlmClient({
          baseUrl: m.baseUrl,
          apiKey: m.apiKey ?? "none",
          model: m.name,
          timeoutMs: timeout_seconds * 1000,
        }),
      })),
      maxRetries: config.model.max_retries,
      ...(options.backoff && { backoff: options.backoff }),
      onAttempt: (attempt, request: ModelChainRequest) => {
        this.health.record(attempt);
        const session = request.label;
        options.onAttempt?.(attempt, session);
        if (session) {
          const log = [...(this.attemptLog.get(session) ?? []), attempt].slice(-ATTEMPTS_KEPT);
          boundedSet(this.attemptLog, session, log);
        }
        if (attempt.outcome === "ok") {
          if (attempt.attempt > 1)
            logger.info({ session, ...attempt }, "model call succeeded after retries");
        } else {
          logger.warn({ session, ...attempt }, "model call failed");
        }
      },
    });
  }

  /** One model call through the chain, its attempts filed under `sessionId`. */
  complete(request: ModelChainRequest, sessionId?: string): Promise<LlmResult> {
    return this.chain.complete({ ...request, ...(sessionId && { label: sessionId }) });
  }

  /** The configured model a name means, or undefined. */
  find(name: string): WindowSource | undefined {
    return this.models.find((m) => m.name === name);
  }

  /** The window of the model a session uses. */
  windowOf(preferred: string | null | undefined): Promise<number> {
    return this.windows.of(this.find(preferred ?? "") ?? this.models[0]!);
  }

  gaugeFor(sessionId: string): TokenGauge {
    let gauge = this.gauges.get(sessionId);
    if (!gauge) {
      gauge = new TokenGauge();
      boundedSet(this.gauges, sessionId, gauge);
    }
    return gauge;
  }

  /** The latest model calls made for a transcript, oldest first. */
  attempts(sessionId: string): readonly ModelAttempt[] {
    return this.attemptLog.get(sessionId) ?? [];
  }

  async keeper(input: KeeperInput, logger?: Logger): Promise<ContextKeeper> {
    const preferred = this.find(input.preferred ?? "")?.name;
    return new ContextKeeper({
      complete: (request) => this.complete(request, input.sessionId),
      model: preferred ?? this.models[0]!.name,
      ...(preferred && { preferred }),
      windowTokens: await this.windowOf(preferred),
      threshold: this.threshold,
      gauge: this.gaugeFor(input.sessionId),
      summary: input.summary,
      sink: input.sink,
      onCompaction: (report) =>
        logger?.info({ session: input.sessionId, ...report }, "older messages summarised"),
    });
  }
}

/** Sets `key`, forgetting the oldest entry once the map is full. */
function boundedSet<T>(map: Map<string, T>, key: string, value: T): void {
  if (map.size >= REMEMBERED_SESSIONS && !map.has(key)) {
    const oldest = map.keys().next().value;
    if (oldest !== undefined) map.delete(oldest);
  }
  map.set(key, value);
}
