/** A `/v1` request body read and validated, or the 4xx that refuses it. */
import type { Context } from "hono";
import type { ClientToolResult } from "../../contract/platform.js";
import type { AppEnv } from "../../control/http-server.js";
import { readJson } from "../../control/node-request.js";
import { apiError } from "./errors.js";
import { chatMessagesOf, ResponsesRequest } from "./responses-wire.js";
import { ChatCompletionRequest, imagesOf, messageText, trailingToolResults } from "./wire.js";

/** The validated request; throws the 4xx that refuses it. */
export async function readChatRequest(c: Context<AppEnv>): Promise<{
  body: unknown;
  request: ChatCompletionRequest;
  text: string;
  images: { url: string; mime?: string }[];
  /** The results of the client's calls the request ends with (then there is no text). */
  results: ClientToolResult[];
}> {
  // JSON only: a form or text/plain body is what a cross-site page could send without a preflight.
  if (!/^application\/json\b/i.test(c.req.header("content-type") ?? "")) {
    throw apiError("unsupported_media_type");
  }
  const body = await readJson(c).catch(() => {
    throw apiError("bad_json");
  });
  const parsed = ChatCompletionRequest.safeParse(body);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const where = issue.path.join(".") || "body";
    throw apiError("invalid_request", `Invalid request: ${where}: ${issue.message}`);
  }
  const request = parsed.data;
  // One answer per request: Keel's agent runs one turn, so several choices are not on offer.
  if (request.n !== undefined && request.n !== null && request.n !== 1) {
    throw apiError(
      "invalid_request",
      `n must be 1: Keel runs one agent turn per request and answers with one choice (got n=${request.n}).`,
      "n",
    );
  }
  const last = request.messages[request.messages.length - 1]!;
  const trailing = trailingToolResults(request.messages);
  if (!trailing.ok) throw apiError("invalid_request", `Invalid request: ${trailing.error}`);
  if (trailing.results.length > 0) {
    return { body, request, text: "", images: [], results: trailing.results };
  }
  const images = imagesOf(last);
  if (!images.ok) throw apiError("invalid_request", `Invalid request: ${images.error}`);
  if (last.role !== "user" || (messageText(last).trim() === "" && images.images.length === 0)) {
    throw apiError(
      "invalid_request",
      "The last message must be a non-empty user message, or the results (role tool) of the tool calls of the assistant message before them.",
    );
  }
  return { body, request, text: messageText(last), images: images.images, results: [] };
}

/** The validated Responses request, as chat messages; throws the 4xx that refuses it. */
export async function readResponsesRequest(c: Context<AppEnv>): Promise<{
  request: ResponsesRequest;
  messages: ChatCompletionRequest["messages"];
  text: string;
  images: { url: string; mime?: string }[];
}> {
  if (!/^application\/json\b/i.test(c.req.header("content-type") ?? "")) {
    throw apiError("unsupported_media_type");
  }
  const body = await readJson(c).catch(() => {
    throw apiError("bad_json");
  });
  const parsed = ResponsesRequest.safeParse(body);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const where = issue.path.join(".") || "body";
    throw apiError("invalid_request", `Invalid request: ${where}: ${issue.message}`, where);
  }
  const request = parsed.data;
  if (request.tools?.length) {
    throw apiError(
      "invalid_request",
      "tools are not supported on /v1/responses; define them on /v1/chat/completions, which runs them as client tools.",
      "tools",
    );
  }
  const converted = chatMessagesOf(request);
  if (!converted.ok) throw apiError("invalid_request", `Invalid request: ${converted.error}`);
  const messages = ChatCompletionRequest.parse({ messages: converted.messages }).messages;
  const last = messages[messages.length - 1]!;
  const images = imagesOf(last);
  if (!images.ok) throw apiError("invalid_request", `Invalid request: ${images.error}`);
  if (last.role !== "user" || (messageText(last).trim() === "" && images.images.length === 0)) {
    throw apiError("invalid_request", "The last input item must be a non-empty user message.");
  }
  return { request, messages, text: messageText(last), images: images.images };
}
