/**
 * The one model client a gateway calls, built once from the config: the chain of models (main
 * model, then `model.fallbacks`) with retries, whether the model answers at all (for the
 * alerts), and the latest attempts per transcript (for `/status`). The agent's turns and the
 * context keeper's summaries both call it; it calls the endpoints (llm-client.ts).
 */
import type { Logger } from "pino";
import type { Config } from "../config/schema.js";
import { createLlmClient } from "./llm-client.js";
import {
  type BackoffPolicy,
  createModelChain,
  type ModelAttempt,
  type ModelChainRequest,
} from "./model-chain.js";
import { ModelHealth } from "./model-health.js";
import type { LlmResult } from "./types.js";

/** Transcripts whose attempts are remembered (the oldest are forgotten first). */
const REMEMBERED_SESSIONS = 1_000;
const ATTEMPTS_KEPT = 8;

/** One configured model endpoint. */
export interface ModelEndpoint {
  baseUrl: string;
  name: string;
  apiKey?: string | undefined;
}

export interface ModelClientOptions {
  backoff?: BackoffPolicy;
  /** Told of every model call as it ends, with the transcript it was made for (metrics, traces). */
  onAttempt?: ModelAttemptObserver;
}

export type ModelAttemptObserver = (attempt: ModelAttempt, sessionId: string | undefined) => void;

export class ModelClient {
  /** Main model first, then the fallbacks. */
  readonly models: readonly ModelEndpoint[];
  /** Since when every call has failed (for the alerts). */
  readonly health = new ModelHealth();
  private readonly chain: ReturnType<typeof createModelChain>;
  private readonly attemptLog = new Map<string, ModelAttempt[]>();

  constructor(model: Config["model"], logger: Logger, options: ModelClientOptions = {}) {
    const { base_url, name, api_key, timeout_seconds } = model;
    if (!base_url || !name) throw new Error("ModelClient needs model.base_url and model.name");
    this.models = [
      { baseUrl: base_url, name, apiKey: api_key },
      ...model.fallbacks.map((f) => ({ baseUrl: f.base_url, name: f.name, apiKey: f.api_key })),
    ];
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
      maxRetries: model.max_retries,
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
  find(name: string): ModelEndpoint | undefined {
    return this.models.find((m) => m.name === name);
  }

  /** The latest model calls made for a transcript, oldest first. */
  attempts(sessionId: string): readonly ModelAttempt[] {
    return this.attemptLog.get(sessionId) ?? [];
  }
}

/** Sets `key`, forgetting the oldest entry once the map is full. */
export function boundedSet<T>(map: Map<string, T>, key: string, value: T): void {
  if (map.size >= REMEMBERED_SESSIONS && !map.has(key)) {
    const oldest = map.keys().next().value;
    if (oldest !== undefined) map.delete(oldest);
  }
  map.set(key, value);
}
