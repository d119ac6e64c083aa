/**
 * The official `openai` client as Keel builds it for any OpenAI-compatible endpoint (chat
 * completions, transcriptions): settings given explicitly, so it reads none of its OPENAI_*
 * environment variables, and its logging off. The SDK is a large package, so it is loaded with
 * the first call that needs it, not with every start.
 */
import type OpenAI from "openai";

export type OpenAiSdk = typeof import("openai");

export interface OpenAiClientOptions {
  baseUrl: string;
  /** Unset for keyless local endpoints. */
  apiKey?: string | undefined;
  maxRetries: number;
  timeoutMs: number;
  fetch?: typeof globalThis.fetch;
}

export function loadOpenAiSdk(): Promise<OpenAiSdk> {
  return import("openai");
}

export function openAiClient(sdk: OpenAiSdk, options: OpenAiClientOptions): OpenAI {
  return new sdk.default({
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
