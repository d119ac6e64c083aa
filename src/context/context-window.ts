/**
 * A model's context window: `model.context_window` when configured, else what the endpoint's
 * `GET /models` says about the model (`context_length`, `context_window` or `max_model_len`, as
 * OpenRouter, LM Studio and vLLM name it), else 32,768 tokens.
 */
export const DEFAULT_CONTEXT_WINDOW = 32_768;
/** A failed lookup is tried again after this long. */
const RETRY_LOOKUP_MS = 5 * 60_000;

export interface WindowSource {
  baseUrl: string;
  name: string;
  apiKey?: string | undefined;
}

export class ContextWindows {
  private readonly known = new Map<string, number>();
  private readonly failedAt = new Map<string, number>();

  constructor(
    private readonly configured: number | undefined,
    private readonly timeoutMs = 5_000,
  ) {}

  /** The window of `source`, looked up once (the configured value wins). Never throws. */
  async of(source: WindowSource): Promise<number> {
    if (this.configured !== undefined) return this.configured;
    const key = `${source.baseUrl} ${source.name}`;
    const known = this.known.get(key);
    if (known !== undefined) return known;
    const failed = this.failedAt.get(key);
    if (failed !== undefined && Date.now() - failed < RETRY_LOOKUP_MS)
      return DEFAULT_CONTEXT_WINDOW;
    const found = await lookup(source, this.timeoutMs);
    if (found === undefined) {
      this.failedAt.set(key, Date.now());
      return DEFAULT_CONTEXT_WINDOW;
    }
    this.known.set(key, found);
    return found;
  }
}

async function lookup(source: WindowSource, timeoutMs: number): Promise<number | undefined> {
  try {
    const response = await fetch(`${source.baseUrl.replace(/\/+$/, "")}/models`, {
      headers: source.apiKey ? { authorization: `Bearer ${source.apiKey}` } : {},
      signal: AbortSignal.timeout(timeoutMs),
    });
    if (!response.ok) return undefined;
    const body = (await response.json()) as { data?: Array<Record<string, unknown>> };
    const entry = body.data?.find((m) => m.id === source.name);
    for (const field of ["context_length", "context_window", "max_model_len"]) {
      const value = entry?.[field];
      if (typeof value === "number" && Number.isInteger(value) && value >= 1024) return value;
    }
    return undefined;
  } catch {
    return undefined;
  }
}
