/**
 * The text of a PDF, page by page. unpdf packages Mozilla's PDF.js for server runtimes (no
 * worker thread, no canvas, no native code) and is kept in step with PDF.js releases; it loads
 * on the first PDF fetched.
 */

export interface PdfText {
  pages: number;
  text: string;
}

export async function pdfText(bytes: Uint8Array): Promise<PdfText> {
  const { extractText, getDocumentProxy } = await import("unpdf");
  // PDF.js takes ownership of the buffer it is given: hand it a copy.
  const document = await getDocumentProxy(new Uint8Array(bytes));
  const { totalPages, text } = await extractText(document, { mergePages: false });
  const pages = (text as string[]).map((page, index) => `## Page ${index + 1}\n\n${page.trim()}`);
  return { pages: totalPages, text: pages.join("\n\n") };
}
