/**
 * The context side of the configured models: each model's context window, a token gauge per
 * transcript, and the per-turn {@link ContextKeeper}, over the one model client (agent/
 * model-client.ts), which the keeper's summaries call as the agent's turns do.
 */
import type { Logger } from "pino";
import type { KeeperRequest } from "../agent/agent.js";
import type { ModelAttempt } from "../agent/model-chain.js";
import { boundedSet, type ModelClient, type ModelEndpoint } from "../agent/model-client.js";
import type { ModelHealth } from "../agent/model-health.js";
import type { Config } from "../config/schema.js";
import { ContextKeeper } from "./context-keeper.js";
import { ContextWindows } from "./context-window.js";
import { TokenGauge } from "./token-gauge.js";

export class ModelStack {
  readonly threshold: number;
  private readonly windows: ContextWindows;
  private readonly gauges = new Map<string, TokenGauge>();

  constructor(
    config: Config,
    readonly client: ModelClient,
  ) {
    this.threshold = config.agent.compaction.threshold;
    this.windows = new ContextWindows(config.model.context_window);
  }

  /** Main model first, then the fallbacks. */
  get models(): readonly ModelEndpoint[] {
    return this.client.models;
  }

  /** Since when every call has failed (for the alerts). */
  get health(): ModelHealth {
    return this.client.health;
  }

  /** The configured model a name means, or undefined. */
  find(name: string): ModelEndpoint | undefined {
    return this.client.find(name);
  }

  /** The latest model calls made for a transcript, oldest first. */
  attempts(sessionId: string): readonly ModelAttempt[] {
    return this.client.attempts(sessionId);
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

  async keeper(input: KeeperRequest, logger?: Logger): Promise<ContextKeeper> {
    const preferred = this.find(input.preferred ?? "")?.name;
    return new ContextKeeper({
      complete: (request) => this.client.complete(request, input.sessionId),
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
