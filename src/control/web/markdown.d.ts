/** Types of markdown.js (a plain ES module served to the page as-is). */

/** Escapes text for use in HTML content and attribute values. */
export function escapeHtml(text: string): string;
/** Renders Markdown to an HTML string that is safe to assign to innerHTML. */
export function renderMarkdown(source: string): string;
