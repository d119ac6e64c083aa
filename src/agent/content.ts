/** Reading user message content, which is plain text or a list of parts (text and images). */
import type { UserContentPart } from "./types.js";

export type UserContent = string | UserContentPart[];

/** The text of a user message; each image counts as `[image]` so a summary still shows it. */
export function contentText(content: UserContent): string {
  if (typeof content === "string") return content;
  return content.map((part) => (part.type === "text" ? part.text : "[image]")).join("\n");
}
