/**
 * Matrix's side of progress people can see (progress-view.ts, stream-editor.ts): a preview is a
 * message, edited in place with `m.replace` events (clients show the latest text with an
 * "(edited)" mark); a removed piece is redacted. A final piece newly posted uses the reply's
 * transaction id (`keel-<outbox row>-<piece>`), so a retry does not post it twice.
 */
import { randomUUID } from "node:crypto";
import type { ChatAddress, OutboundReply } from "../../contract/platform.js";
import { type ProgressContext, ProgressView } from "../progress-view.js";
import { splitText } from "../text-pieces.js";
import { type MatrixClient, MatrixError } from "./client.js";

/** Matrix events may be up to 64 KiB; a piece stays well inside that. */
export const MATRIX_PIECE_CHARS = 16_000;
/** Least time between calls in a room: homeservers rate-limit sends per user. */
const ROOM_INTERVAL_MS = 1_000;

const text = (body: string) => ({ msgtype: "m.text", body });

function replacement(eventId: string, body: string): Record<string, unknown> {
  return {
    ...text(`* ${body}`),
    "m.new_content": text(body),
    "m.relates_to": { rel_type: "m.replace", event_id: eventId },
  };
}

export function createMatrixProgress(
  client: MatrixClient,
  context: ProgressContext,
  send: (reply: OutboundReply) => Promise<void>,
): ProgressView {
  const once = () => `keel-p-${randomUUID()}`;
  return new ProgressView(context, {
    platform: "matrix",
    minIntervalMs: () => ROOM_INTERVAL_MS,
    preview: {
      limit: MATRIX_PIECE_CHARS,
      send: (address, body) => client.send(address.chatId, once(), text(body), { wait: false }),
      edit: async (address, eventId, body) => {
        await client.send(address.chatId, once(), replacement(eventId, body), { wait: false });
      },
      retryAfterMs: (err) =>
        err instanceof MatrixError && (err.status === 429 || err.errcode === "M_LIMIT_EXCEEDED")
          ? Math.max(err.retryAfterMs ?? 1000, 1)
          : null,
    },
    final: (paced) => {
      const edit = (address: ChatAddress, eventId: string, body: string) =>
        paced(address, async () => {
          await client.send(address.chatId, once(), replacement(eventId, body));
          return true;
        });
      return {
        sendPiece: (address, piece, _first, origin) =>
          paced(address, () =>
            client.send(
              address.chatId,
              origin ? `keel-${origin.reply.outboxId}-${origin.index}` : once(),
              text(piece),
            ),
          ),
        editPiece: edit,
        editPlain: edit,
        remove: (address, eventId) =>
          paced(address, () => client.redact(address.chatId, eventId, once())),
      };
    },
    pieces: (body) => splitText(body, MATRIX_PIECE_CHARS),
    send,
    describeError: (err) => (err instanceof Error ? err.message : String(err)),
  });
}
