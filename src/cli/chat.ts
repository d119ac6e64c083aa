/**
 * `keel chat`: a terminal conversation through the gateway's OpenAI-compatible API, so it is
 * stored and resumable like any other session. Uses this home's running gateway when there is
 * one (found through its pid file and confirmed at its address, never by the port alone),
 * otherwise runs one in-process (API only, on a free loopback port) for the conversation. Tool
 * calls are shown on stderr as they start (`⚙ terminal: ls -la`); a call that waits for approval
 * asks on stderr, takes the answer from the next line, and the reply continues once it is given.
 */
import { createInterface } from "node:readline/promises";
import OpenAI from "openai";
import type { Config } from "../config/schema.js";
import { createGateway } from "../gateway/create-gateway.js";
import type { Gateway } from "../gateway/gateway.js";
import { errorMessage } from "../lib/errors.js";
import { createLogger } from "../lib/logger.js";
import { TOOL_EVENTS_HEADER } from "../platforms/openai-api/chat-stream.js";
import type { ToolStarted } from "../platforms/openai-api/turn-waiters.js";
import { findOwnGateway, gatewayBaseUrl, pollUntil, unconfirmedText } from "./gateway-probe.js";
import { type CliIo, EXIT } from "./io.js";
import { type GlobalOptions, loadForCommand } from "./load.js";
import { toolLine } from "./tool-line.js";

/** How long `keel chat` waits for this home's gateway while it does not answer yet (starting). */
const STARTING_WAIT_MS = 15_000;

export async function chat(
  options: GlobalOptions & { session?: string },
  io: CliIo,
): Promise<number> {
  const loaded = loadForCommand(options, io);
  if (!loaded.ok) return loaded.code;
  const { config } = loaded.loaded;
  let own = await findOwnGateway(config);
  if (own.state === "unconfirmed" && own.answered === null) {
    // Silent at its address: most likely still starting. Wait a little for it.
    io.err(`(this home's gateway, pid ${own.record.pid}, is not answering yet: waiting for it)`);
    own =
      (await pollUntil(
        async () => {
          const now = await findOwnGateway(config);
          return now.state === "unconfirmed" && now.answered === null ? null : now;
        },
        { timeoutMs: STARTING_WAIT_MS, intervalMs: 250 },
      )) ?? own;
  }
  if (own.state === "unconfirmed") {
    io.err(`keel: ${unconfirmedText(own, config.http)}.`);
    io.err("Check it with `keel gateway status`, or stop it with `keel gateway stop`.");
    return EXIT.failure;
  }
  let baseUrl = gatewayBaseUrl(config.http);
  let local: Gateway | null = null;
  if (own.state === "not_running") {
    local = await startLocalGateway(config);
    baseUrl = `http://127.0.0.1:${local.port}`;
    io.err("(no gateway running: talking to an in-process one; its sessions are stored as usual)");
  }
  try {
    return await converse(
      new OpenAI({
        baseURL: `${baseUrl}/v1`,
        // The control token: `keel chat` is the operator's console (it may /restart).
        apiKey: config.controlToken,
        maxRetries: 0,
      }),
      options.session,
      io,
    );
  } finally {
    if (local) {
      local.requestStop({ restart: false, signalInitiated: false });
      await local.exited;
    }
  }
}

async function converse(client: OpenAI, resumeId: string | undefined, io: CliIo): Promise<number> {
  let sessionId = resumeId;
  // A conversation that ends on a failed exchange exits non-zero, so a script notices (e.g. an
  // unknown --session); one that recovered from a passing error does not.
  let failed = false;
  const rl = createInterface({ input: io.stdin, terminal: false });
  const lines = rl[Symbol.asyncIterator]();
  const nextLine = async (): Promise<string | null> => {
    const next = await lines.next();
    return next.done ? null : next.value;
  };
  io.err("Type a message and press Enter; /help for commands; Ctrl-D to quit.");
  for (let line = await nextLine(); line !== null; line = await nextLine()) {
    const text = line.trim();
    if (!text) continue;
    try {
      const headers: Record<string, string> = { [TOOL_EVENTS_HEADER]: "1" };
      if (sessionId) headers["X-Session-Id"] = sessionId;
      const { data: stream, response } = await client.chat.completions
        .create(
          { model: "keel", stream: true, messages: [{ role: "user", content: text }] },
          { headers },
        )
        .withResponse();
      sessionId = response.headers.get("x-session-id") ?? sessionId;
      // Tool lines go to stderr on a line of their own, between pieces of the streamed reply.
      let midLine = false;
      for await (const chunk of stream) {
        const approval = (chunk as { keel_approval?: { id: string } }).keel_approval;
        if (approval) {
          // The turn waits for this answer; the stream goes on with the turn that follows it.
          if (midLine) io.write("\n");
          midLine = false;
          const answered = await answerApproval(client, sessionId, approval.id, nextLine, io);
          if (!answered) {
            stream.controller.abort();
            break;
          }
          continue;
        }
        const tool = (chunk as { keel_tool?: ToolStarted }).keel_tool;
        if (tool) {
          if (midLine) io.write("\n");
          midLine = false;
          io.err(toolLine(tool.name, tool.arguments));
        }
        const piece = chunk.choices[0]?.delta?.content ?? "";
        io.write(piece);
        if (piece) midLine = !piece.endsWith("\n");
      }
      io.write("\n");
      failed = false;
    } catch (err) {
      // A `/restart` that was accepted ends its own exchange with `gateway_stopping`: that is
      // the command working, not a failure.
      if (isRestartCommand(text) && errorCode(err) === "gateway_stopping") {
        io.err("(the gateway is restarting)");
        failed = false;
        continue;
      }
      io.err(`error: ${errorMessage(err)}`);
      failed = true;
    }
  }
  if (sessionId)
    io.err(`(session ${sessionId}: continue with \`keel chat --session ${sessionId}\`)`);
  return failed ? EXIT.failure : EXIT.ok;
}

/**
 * Asks on stderr how to answer approval `id`, reads the answer from stdin and sends it as the
 * chat command (`/approve ID`, `/approve ID session`, `/deny ID`; a line starting with `/` is
 * sent as typed), printing what the gateway says. False when stdin ended first: the approval
 * stays pending, for the dashboard or `keel approvals`.
 */
async function answerApproval(
  client: OpenAI,
  sessionId: string | undefined,
  id: string,
  nextLine: () => Promise<string | null>,
  io: CliIo,
): Promise<boolean> {
  io.err(`Approve ${id}? y = once, s = for this session, anything else denies:`);
  const line = await nextLine();
  if (line === null) {
    io.err(`(no answer: approval ${id} stays pending; \`keel approvals\` answers it)`);
    return false;
  }
  const answer = line.trim();
  const command = answer.startsWith("/")
    ? answer
    : /^y(es)?$/i.test(answer)
      ? `/approve ${id}`
      : /^s(ession)?$/i.test(answer)
        ? `/approve ${id} session`
        : `/deny ${id}`;
  const told = await client.chat.completions.create(
    { model: "keel", messages: [{ role: "user", content: command }] },
    sessionId ? { headers: { "X-Session-Id": sessionId } } : {},
  );
  io.write(`${told.choices[0]?.message.content ?? ""}\n`);
  return true;
}

function isRestartCommand(text: string): boolean {
  return /^\/restart(?:@\S+)?$/i.test(text);
}

function errorCode(err: unknown): string | null {
  return err instanceof OpenAI.APIError && typeof err.code === "string" ? err.code : null;
}

async function startLocalGateway(config: Config): Promise<Gateway> {
  const local: Config = {
    ...config,
    http: { ...config.http, host: "127.0.0.1", port: 0 },
    platforms: { ...config.platforms, webchat: { enabled: false } },
    telegramEnabled: false,
    // Not the operator's gateway: its heartbeat would tell the monitor a dead gateway is fine.
    alerts: { after: config.alerts.after, heartbeat_every: config.alerts.heartbeat_every },
  };
  // No supervisor and no successor: a /restart here ends the conversation's gateway.
  const gateway = createGateway(local, { logger: createLogger({ level: "silent" }) });
  await gateway.start();
  return gateway;
}
