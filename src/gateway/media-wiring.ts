/** Builds the runner's media settings from the config: where files go, limits, transcription. */
import { join } from "node:path";
import { createTranscriber } from "../agent/media/transcriber.js";
import type { Config } from "../config/schema.js";
import type { PlatformRegistry } from "../contract/registry.js";
import type { MediaSettings } from "../runner/media-input.js";

export function createMediaSettings(
  config: Config,
  platforms: Pick<PlatformRegistry, "fetchFile">,
): MediaSettings {
  const { model } = config;
  const transcription = model.transcription;
  // Default: the main endpoint and key, with whisper-1.
  const baseUrl = transcription.base_url ?? model.base_url;
  const apiKey = transcription.api_key ?? (transcription.base_url ? undefined : model.api_key);
  return {
    inboxRoot: join(config.cwd, "inbox"),
    maxFileBytes: Math.round(config.platforms.telegram.max_file_mb * 1_048_576),
    vision: model.vision,
    showTranscripts: config.display.show_transcripts,
    fetchFile: (platform, attachment, maxBytes, signal) =>
      platforms.fetchFile(platform, attachment, maxBytes, signal),
    transcribe: baseUrl
      ? createTranscriber({
          baseUrl,
          ...(apiKey !== undefined && { apiKey }),
          model: transcription.name,
          timeoutMs: model.timeout_seconds * 1000,
        })
      : null,
  };
}
