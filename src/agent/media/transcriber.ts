/**
 * Speech to text through an OpenAI-compatible `/audio/transcriptions` endpoint, with the official
 * `openai` client. Ogg/Opus voice notes go as they are: whisper-1 and whisper.cpp servers take
 * them, and Keel cannot count on ffmpeg being installed.
 */
import type OpenAI from "openai";
import { loadOpenAiSdk, openAiClient } from "../openai-client.js";

export interface AudioFile {
  bytes: Buffer;
  name: string;
  mime: string;
}

/** Returns the transcript; throws an Error with a short, secret-free message on failure. */
export type Transcriber = (audio: AudioFile, signal: AbortSignal) => Promise<string>;

export interface TranscriberOptions {
  baseUrl: string;
  apiKey?: string;
  model: string;
  timeoutMs: number;
}

export function createTranscriber(options: TranscriberOptions): Transcriber {
  // The SDK loads with the first voice note, not with every start.
  let client: OpenAI | undefined;
  return async (audio, signal) => {
    const loaded = await loadOpenAiSdk();
    client ??= openAiClient(loaded, {
      baseUrl: options.baseUrl,
      apiKey: options.apiKey,
      maxRetries: 2,
      timeoutMs: options.timeoutMs,
    });
    try {
      const result = await client.audio.transcriptions.create(
        {
          file: await loaded.toFile(audio.bytes, audio.name, { type: audio.mime }),
          model: options.model,
        },
        { signal },
      );
      return result.text.trim();
    } catch (error) {
      throw new Error(describe(error, loaded.default));
    }
  };
}

function describe(error: unknown, OpenAI: typeof import("openai").default): string {
  if (error instanceof OpenAI.APIUserAbortError) return "interrupted";
  if (error instanceof OpenAI.APIConnectionTimeoutError)
    return "the endpoint did not answer in time";
  if (error instanceof OpenAI.APIConnectionError) return "the endpoint could not be reached";
  if (error instanceof OpenAI.APIError && error.status !== undefined) {
    return `the endpoint answered HTTP ${error.status}`;
  }
  return "the endpoint sent an unusable answer";
}
