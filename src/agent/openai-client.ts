/**
 * The official `openai` client as Keel builds it for any OpenAI-compatible endpoint (chat
 * completions, transcriptions): settings given explicitly, so it reads none of its OPENAI_*
 * environment variables, and its logging off.
 */
import OpenAI from "openai";

export interface OpenAiClientOptions {
  baseUrl: string;
  /** Unset for keyless local endpoints. */
  apiKey?: string | undefined;
  maxRetries: number;
  timeoutMs: number;
  fetch?: typeof globalThis.fetch;
}

export function openAiClient(options: OpenAiClientOptions): OpenAI {
  return new OpenAI({
    baseURL: options.baseUrl,
    // The client refuses to start without a key; keyless local endpoints ignore this one.
    apiKey: options.apiKey || "keel-no-key",
    organization: null,
    project: null,
    webhookSecret: null,
    adminAPIKey: null,
    logLevel: "off",
    maxRetries: options.maxRetries,
    timeout: options.timeoutMs,
    fetch: options.fetch,
  });
}
