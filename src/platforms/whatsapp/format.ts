/** Text for WhatsApp: its one limit (4096 characters a message) and its bold marker. */
import { splitText } from "../text-pieces.js";

export const WHATSAPP_TEXT_LIMIT = 4096;
/** An interactive message's body is shorter (1024); a longer approval question goes as text first. */
export const WHATSAPP_BUTTON_BODY_LIMIT = 1024;

/** Markdown's `**bold**` is WhatsApp's `*bold*`; the rest of the agent's text reads as it is. */
export function toWhatsappText(markdown: string): string {
  return markdown.replace(/\*\*(\S(?:[^*\n]*\S)?)\*\*/g, "*$1*");
}

/** Pieces of at most 4096 characters (text-pieces.ts). */
export function splitWhatsappText(text: string, limit = WHATSAPP_TEXT_LIMIT): string[] {
  return splitText(text, limit);
}
