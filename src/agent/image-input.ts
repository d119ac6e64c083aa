/**
 * Images in model requests. The transcript keeps a received image as a `saved_image` part (its
 * path in the workspace); each request turns it into an `image_url` data URL when the model can
 * see images, or into a text note naming the saved path when it cannot (`model.vision: false`, or
 * the endpoint refused images with a 400). Only the most recent images travel as pixels: older
 * ones become notes, so a long chat does not resend every photo on every call.
 */
import { readFile } from "node:fs/promises";
import type { ChatMessage, LlmClient, LlmRequest, LlmResult, UserContentPart } from "./types.js";

/** User messages (newest first) whose images are sent as images; older ones become notes. */
export const RECENT_IMAGE_MESSAGES = 3;
/** An image larger than this is described instead of sent (providers cap inline images). */
const MAX_INLINE_IMAGE_BYTES = 10 * 1_048_576;

export interface ImageInputState {
  /** The endpoint answered a request with images by refusing them: send notes from now on. */
  refused: boolean;
}

export interface ImageInputOptions {
  /** `model.vision`. */
  vision: boolean;
  /** Shared by every turn of one model, so a refusal is learned once. */
  state: ImageInputState;
  /** Called when the endpoint refused images and the request was repeated without them. */
  onImagesRefused?(): void;
}

/** Wraps a model client so that requests carry images the way the model can take them. */
export function withImageInput(llm: LlmClient, options: ImageInputOptions): LlmClient {
  return {
    async complete(input: LlmRequest): Promise<LlmResult> {
      if (!input.messages.some(hasImages)) return llm.complete(input);
      const asImages = options.vision && !options.state.refused;
      const result = await llm.complete({
        ...input,
        messages: await resolveImages(input.messages, asImages),
      });
      if (!asImages || !refusesImages(result)) return result;
      options.state.refused = true;
      options.onImagesRefused?.();
      return llm.complete({ ...input, messages: await resolveImages(input.messages, false) });
    },
  };
}

/** A 400 whose message is about images (the usual wording of endpoints without vision). */
export function refusesImages(result: LlmResult): boolean {
  return (
    !result.ok &&
    result.kind === "http" &&
    result.status === 400 &&
    /image|vision|multimodal|multi-modal/i.test(result.error)
  );
}

function hasImages(message: ChatMessage): boolean {
  return (
    message.role === "user" &&
    typeof message.content !== "string" &&
    message.content.some((part) => part.type !== "text")
  );
}

/**
 * The messages with every `saved_image` resolved: a data URL in the last
 * {@link RECENT_IMAGE_MESSAGES} user messages with images when `asImages`, a note otherwise.
 * `image_url` parts (given by an API client) stay as they are when `asImages`.
 */
export async function resolveImages(
  messages: ChatMessage[],
  asImages: boolean,
): Promise<ChatMessage[]> {
  const recent = new Set(
    messages
      .map((m, index) => (hasImages(m) ? index : -1))
      .filter((index) => index >= 0)
      .slice(-RECENT_IMAGE_MESSAGES),
  );
  return Promise.all(
    messages.map(async (message, index): Promise<ChatMessage> => {
      if (message.role !== "user" || typeof message.content === "string") return message;
      const inline = asImages && recent.has(index);
      const parts = await Promise.all(message.content.map((part) => resolvePart(part, inline)));
      return { role: "user", content: parts };
    }),
  );
}

async function resolvePart(part: UserContentPart, inline: boolean): Promise<UserContentPart> {
  if (part.type === "text") return part;
  if (part.type === "image_url") {
    return inline ? part : { type: "text", text: imageUrlNote(part.image_url.url) };
  }
  if (!inline) return { type: "text", text: savedImageNote(part.path) };
  const bytes = await readFile(part.path).catch(() => null);
  if (!bytes) return { type: "text", text: `[An image was saved at ${part.path}, now missing.]` };
  if (bytes.length > MAX_INLINE_IMAGE_BYTES)
    return { type: "text", text: savedImageNote(part.path) };
  const url = `data:${part.mime};base64,${bytes.toString("base64")}`;
  return { type: "image_url", image_url: { url } };
}

export function savedImageNote(path: string): string {
  return `[The user sent an image; you cannot see it. It is saved at ${path}.]`;
}

function imageUrlNote(url: string): string {
  const where = url.startsWith("data:") ? "inline" : url;
  return `[The user sent an image (${where}); you cannot see it.]`;
}
