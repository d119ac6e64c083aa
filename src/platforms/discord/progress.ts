/**
 * Discord's side of progress people can see (progress-view.ts, stream-editor.ts): previews are
 * posted and edited (PATCH) in the reply's channel or thread, at most one call a second per
 * channel (Discord allows 5 message edits per 5 s in a channel); a 429 on a preview suspends the
 * channel's previews for its `retry_after` instead of waiting inline. Final pieces are Discord
 * Markdown as every reply is; a piece newly posted carries the reply's part nonce (enforced), so
 * a retry after a crash gets back the message already created.
 */
import { RateLimitError, type REST } from "@discordjs/rest";
import { type ProgressContext, type ProgressSettings, ProgressView } from "../progress-view.js";
import { type DiscordSender, describeDiscordError, partNonce } from "./send.js";
import { DISCORD_MESSAGE_LIMIT, splitDiscordMessage } from "./split.js";

export interface DiscordProgressSettings extends ProgressSettings {
  /** Least time between calls in a channel (5 edits per 5 s). */
  channelIntervalMs?: number;
}

/**
 * The progress view of the Discord adapter. `previewRest` rejects rate-limited calls (a preview
 * skips its turn), while the sender's client waits them out (a final must arrive).
 */
export function createDiscordProgress(
  sender: DiscordSender,
  previewRest: REST,
  context: ProgressContext<DiscordProgressSettings>,
): ProgressView {
  const intervalMs = context.settings.channelIntervalMs ?? 1000;
  return new ProgressView(context, {
    platform: "discord",
    minIntervalMs: () => intervalMs,
    preview: {
      limit: DISCORD_MESSAGE_LIMIT,
      send: (address, text, first) => sender.post(address, text, first, undefined, previewRest),
      edit: async (address, messageId, text) => {
        await sender.edit(address, messageId, text, previewRest);
      },
      retryAfterMs: (err) => (err instanceof RateLimitError ? Math.max(err.retryAfter, 1) : null),
    },
    final: (paced) => ({
      sendPiece: (address, piece, first, origin) =>
        paced(address, () =>
          sender.post(
            address,
            piece,
            first,
            origin ? partNonce(origin.reply.outboxId, origin.index) : undefined,
          ),
        ),
      editPiece: (address, messageId, piece) =>
        paced(address, () => sender.edit(address, messageId, piece)),
      editPlain: (address, messageId, text) =>
        paced(address, () => sender.edit(address, messageId, text)),
      remove: (address, messageId) => paced(address, () => sender.remove(address, messageId)),
    }),
    pieces: (text) => splitDiscordMessage(text),
    send: (reply) => sender.deliver(reply),
    describeError: describeDiscordError,
  });
}
