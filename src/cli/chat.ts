/**
 * `keel chat`: a terminal conversation through the gateway's OpenAI-compatible API, so it is
 * stored and resumable like any other session. Uses the running gateway when there is one,
 * otherwise runs one in-process (API only, on a free loopback port) for the conversation.
 */
import { createInterface } from "node:readline/promises";
import OpenAI from "openai";
import type { Config } from "../config/schema.js";
import { createAgentParts } from "../gateway/agent-wiring.js";
import { Gateway } from "../gateway/gateway.js";
import { createCrashPoint } from "../lib/crash-point.js";
import { errorMessage } from "../lib/errors.js";
import { createLogger } from "../lib/logger.js";
import { KEEL_VERSION } from "../version.js";
import { type CliIo, EXIT } from "./io.js";
import { type GlobalOptions, loadForCommand } from "./load.js";

export async function chat(
  options: GlobalOptions & { session?: string },
  io: CliIo,
): Promise<number> {
  const loaded = loadForCommand(options, io);
  if (!loaded.ok) return loaded.code;
  const { config } = loaded.loaded;
  let baseUrl = `http://${config.http.host}:${config.http.port}`;
  let local: Gateway | null = null;
  if (!(await isUp(baseUrl))) {
    local = await startLocalGateway(config);
    baseUrl = `http://127.0.0.1:${local.port}`;
    io.err("(no gateway running: talking to an in-process one; its sessions are stored as usual)");
  }
  try {
    return await converse(
      new OpenAI({
        baseURL: `${baseUrl}/v1`,
        apiKey: config.platforms.api.key ?? "keel-local",
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
  const rl = createInterface({ input: io.stdin, terminal: false });
  io.err("Type a message and press Enter; /help for commands; Ctrl-D to quit.");
  for await (const line of rl) {
    const text = line.trim();
    if (!text) continue;
    try {
      const { data: stream, response } = await client.chat.completions
        .create(
          { model: "keel", stream: true, messages: [{ role: "user", content: text }] },
          sessionId ? { headers: { "X-Session-Id": sessionId } } : {},
        )
        .withResponse();
      sessionId = response.headers.get("x-session-id") ?? sessionId;
      for await (const chunk of stream) io.write(chunk.choices[0]?.delta?.content ?? "");
      io.write("\n");
    } catch (err) {
      io.err(`error: ${errorMessage(err)}`);
    }
  }
  if (sessionId)
    io.err(`(session ${sessionId}: continue with \`keel chat --session ${sessionId}\`)`);
  return EXIT.ok;
}

async function isUp(baseUrl: string): Promise<boolean> {
  try {
    return (await fetch(`${baseUrl}/healthz`, { signal: AbortSignal.timeout(1500) })).ok;
  } catch {
    return false;
  }
}

async function startLocalGateway(config: Config): Promise<Gateway> {
  const local: Config = {
    ...config,
    http: { ...config.http, host: "127.0.0.1", port: 0 },
    platforms: { ...config.platforms, webchat: { enabled: false } },
    telegramEnabled: false,
  };
  const logger = createLogger({ level: "silent" });
  const gateway = new Gateway({
    config: local,
    logger,
    agent: createAgentParts(local, logger),
    crashPoint: createCrashPoint(undefined),
    version: KEEL_VERSION,
    supervisor: null,
    relaunch: () => {
      throw new Error("an in-process chat gateway is never restarted");
    },
  });
  await gateway.start();
  return gateway;
}
