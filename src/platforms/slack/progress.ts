/**
 * Slack's side of progress people can see (progress-view.ts, stream-editor.ts): previews are
 * posted (`chat.postMessage`) and edited (`chat.update`, Web API tier 3: about one call a second
 * per channel is the pace kept here); a 429 on a preview suspends the channel's previews for its
 * Retry-After instead of waiting inline. Final pieces are mrkdwn as every reply is; a piece newly
 * posted carries the reply's `keel_outbox` metadata and, when an earlier attempt may have posted
 * it, is looked for in the conversation first (send.ts), so a retry never posts it twice.
 */
import { WebAPIRateLimitedError, type WebClient } from "@slack/web-api";
import { type ProgressContext, type ProgressSettings, ProgressView } from "../progress-view.js";
import { escapeMrkdwn, markdownToMrkdwn, splitMrkdwn } from "./format.js";
import { describeSlackError, type SlackSender } from "./send.js";

/**
 * A preview piece's plain text, before escaping (`&<>` become entities, at most 5 units each):
 * well under Slack's 40,000 once escaped.
 */
const PREVIEW_LIMIT = 7_500;

export interface SlackProgressSettings extends ProgressSettings {
  /** Least time between calls in a channel (`chat.update` is tier 3). */
  channelIntervalMs?: number;
}

/** The progress view of the Slack adapter. */
export function createSlackProgress(
  web: WebClient,
  sender: SlackSender,
  context: ProgressContext<SlackProgressSettings>,
): ProgressView {
  const intervalMs = context.settings.channelIntervalMs ?? 1000;
  return new ProgressView(context, {
    platform: "slack",
    minIntervalMs: () => intervalMs,
    preview: {
      limit: PREVIEW_LIMIT,
      // The web client rejects rate-limited calls (adapter.ts): a preview never waits inline.
      send: async (address, text) => {
        const answer = await web.chat.postMessage({
          channel: address.chatId,
          text: escapeMrkdwn(text),
          ...(address.threadId !== undefined ? { thread_ts: address.threadId } : {}),
        });
        if (!answer.ts) throw new Error("Slack answered chat.postMessage without a ts");
        return answer.ts;
      },
      edit: async (address, messageId, text) => {
        await web.chat.update({ channel: address.chatId, ts: messageId, text: escapeMrkdwn(text) });
      },
      retryAfterMs: (err) =>
        err instanceof WebAPIRateLimitedError ? Math.max(err.retryAfter, 1) * 1000 : null,
    },
    final: (paced) => ({
      sendPiece: (address, piece, _first, origin) =>
        paced(address, () =>
          origin
            ? sender.postPiece(origin.reply, origin.index, piece)
            : sender.post(address, piece, null),
        ),
      editPiece: (address, ts, piece) => paced(address, () => sender.update(address, ts, piece)),
      editPlain: (address, ts, text) =>
        paced(address, () => sender.update(address, ts, escapeMrkdwn(text))),
      remove: (address, ts) => paced(address, () => sender.remove(address, ts)),
    }),
    pieces: (text) => splitMrkdwn(markdownToMrkdwn(text)),
    send: (reply) => sender.deliver(reply),
    describeError: describeSlackError,
  });
}
