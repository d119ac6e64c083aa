/**
 * The configured models as one client: a failed call is retried on the same model with backoff
 * (honouring Retry-After) up to `model.max_retries`, then the next model of the chain gets it.
 * A model call has no side effects, so retrying one never touches the tool journal: the agent
 * loop only sees the one result that counts.
 */
import { setTimeout as sleep } from "node:timers/promises";
import { backoffMs } from "../lib/net.js";
import type { LlmClient, LlmRequest, LlmResult, TokenUsage } from "./types.js";

/** One model the chain may call. */
export interface ChainModel {
  name: string;
  client: LlmClient;
}

/** One model call made by the chain, reported as it ends (logs, `/status`). */
export interface ModelAttempt {
  model: string;
  /** 1 for the first call to this model within the request. */
  attempt: number;
  outcome: "ok" | Extract<LlmResult, { ok: false }>["kind"];
  /** How long the call took (metrics, traces). */
  durationMs?: number;
  /** The tokens an answered call reported (absent when the endpoint sent none). */
  usage?: TokenUsage;
  status?: number;
  error?: string;
  /** How long the chain waits before its next call (retry or fallback); absent when it stops. */
  nextInMs?: number;
  nextModel?: string;
}

export interface BackoffPolicy {
  /** First wait; doubled after each failure of the same model. */
  baseMs: number;
  capMs: number;
  /** A Retry-After longer than this skips to the next model instead of waiting. */
  maxRetryAfterMs: number;
}

export const DEFAULT_BACKOFF: BackoffPolicy = {
  baseMs: 500,
  capMs: 30_000,
  maxRetryAfterMs: 60_000,
};

export interface ModelChainOptions {
  /** The main model first, then the fallbacks in order. */
  models: ChainModel[];
  maxRetries: number;
  backoff?: BackoffPolicy;
  onAttempt?(attempt: ModelAttempt, request: ModelChainRequest): void;
}

export interface ModelChainRequest extends LlmRequest {
  /** The model this session chose (`/model`): called first, the others stay its fallbacks. */
  preferred?: string;
  /** Who asked (a transcript id): passed to `onAttempt` for the attempt log. */
  label?: string;
}

/** What the chain does after a failed call. */
type Next = "retry" | "fallback" | "stop";

/** 429, 5xx, timeouts and broken connections pass; credentials or a missing model never will on this endpoint. */
export function classifyFailure(result: Extract<LlmResult, { ok: false }>): Next {
  switch (result.kind) {
    case "aborted":
    case "context_exceeded":
      // A shorter prompt is the cure (compaction), not another model.
      return "stop";
    case "timeout":
    case "network":
      return "retry";
    case "invalid":
      return "fallback";
    case "http": {
      const status = result.status ?? 0;
      if (status === 429 || status === 408 || status === 409 || status >= 500) return "retry";
      if (status === 401 || status === 403 || status === 404) return "fallback";
      return "stop";
    }
  }
}

export function createModelChain(options: ModelChainOptions): LlmClient & {
  complete(input: ModelChainRequest): Promise<LlmResult>;
} {
  const backoff = options.backoff ?? DEFAULT_BACKOFF;
  return {
    async complete(input: ModelChainRequest): Promise<LlmResult> {
      const order = ordered(options.models, input.preferred);
      let last: LlmResult | null = null;
      // Text already shown to the user (a streamed preview) cannot be taken back: a call that
      // failed after it is not repeated, or the preview would show the text twice.
      let streamed = false;
      const request: ModelChainRequest = {
        ...input,
        onTextDelta: (text) => {
          streamed = true;
          input.onTextDelta?.(text);
        },
      };
      for (const [index, model] of order.entries()) {
        const nextModel = order[index + 1]?.name;
        for (let attempt = 1; attempt <= options.maxRetries + 1; attempt++) {
          const started = performance.now();
          const result = await model.client.complete(request);
          const durationMs = performance.now() - started;
          if (result.ok) {
            options.onAttempt?.(
              {
                model: model.name,
                attempt,
                outcome: "ok",
                durationMs,
                ...(result.usage && { usage: result.usage }),
              },
              input,
            );
            return { ...result, model: model.name };
          }
          last = result;
          const next = streamed ? "stop" : classifyFailure(result);
          const retryAfter = result.retryAfterMs;
          const canRetry =
            next === "retry" &&
            attempt <= options.maxRetries &&
            (retryAfter === undefined || retryAfter <= backoff.maxRetryAfterMs);
          const waitMs = canRetry ? (retryAfter ?? delay(backoff, attempt)) : 0;
          const moving = !canRetry && next !== "stop" && nextModel !== undefined;
          options.onAttempt?.(
            {
              model: model.name,
              attempt,
              outcome: result.kind,
              durationMs,
              ...(result.status !== undefined && { status: result.status }),
              error: result.error,
              ...(canRetry && { nextInMs: waitMs }),
              ...(moving && { nextInMs: 0, nextModel }),
            },
            input,
          );
          if (next === "stop") return result;
          if (!canRetry) break;
          if (!(await pause(waitMs, input.signal))) {
            return { ok: false, kind: "aborted", error: "The model request was interrupted." };
          }
        }
      }
      return last ?? { ok: false, kind: "invalid", error: "No model is configured." };
    },
  };
}

function ordered(models: ChainModel[], preferred: string | undefined): ChainModel[] {
  const first = models.find((m) => m.name === preferred);
  return first ? [first, ...models.filter((m) => m !== first)] : models;
}

/** Exponential with up to 25 % jitter, so many sessions hitting one limit spread out. */
function delay(policy: BackoffPolicy, attempt: number): number {
  return Math.round(backoffMs(attempt, policy.baseMs, policy.capMs) * (1 + Math.random() * 0.25));
}

async function pause(ms: number, signal: AbortSignal): Promise<boolean> {
  if (signal.aborted) return false;
  if (ms <= 0) return true;
  try {
    await sleep(ms, undefined, { signal });
    return true;
  } catch {
    return false;
  }
}
