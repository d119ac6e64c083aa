/** Builds the agent from the config: model client, tools, and the turn function the runner calls. */

import { mkdirSync } from "node:fs";
import { join } from "node:path";
import type { Logger } from "pino";
import { runAgentLoop } from "../agent/agent-loop.js";
import { withImageInput } from "../agent/image-input.js";
import {
  resolveSandbox,
  type SandboxState,
  sandboxOptions,
  sandboxView,
} from "../agent/sandbox/sandbox.js";
import { createHomeGuard } from "../agent/tools/home-guard.js";
import { createToolRegistry } from "../agent/tools/index.js";
import { createProcessRegistry } from "../agent/tools/process-registry.js";
import { createReadFileTool } from "../agent/tools/read-file.js";
import { createSendFileTool } from "../agent/tools/send-file.js";
import { createTerminalTool } from "../agent/tools/terminal.js";
import { createWriteFileTool } from "../agent/tools/write-file.js";
import { createWebTools } from "../agent/web/web-tools.js";
import type { Config } from "../config/schema.js";
import { type ModelAttemptObserver, ModelStack } from "../context/model-stack.js";
import { McpHub } from "../mcp/mcp-hub.js";
import { MemoryFile, memoryPromptBlock } from "../memory/memory-file.js";
import { createMemoryTool } from "../memory/memory-tool.js";
import type { AgentRun, IsReadOnlyTool } from "../runner/agent-run.js";
import type { ScheduleBook } from "../schedules/book.js";
import { createScheduleTool } from "../schedules/schedule-tool.js";

/** The agent as the gateway runs it: the turn function, its tools' traits, its MCP servers. */
export interface AgentParts {
  agent: AgentRun | null;
  /** The configured models (chat commands `/model`, `/usage`, `/compact`); absent without a model. */
  models?: ModelStack;
  isReadOnlyTool: IsReadOnlyTool;
  /** Kills every live tool process group; returns how many were signalled. */
  killToolProcesses(): number;
  /** Gives the agent's `schedule` tool the gateway's jobs. */
  bindSchedules?(book: ScheduleBook): void;
  /** The configured MCP servers, started with the gateway. */
  mcp?: McpHub;
  /** `tools.sandbox` as resolved at start (bubblewrap probed once). */
  sandbox: SandboxState;
}

const BASE_PROMPT =
  "You are Keel's agent, reached through a chat platform. You can run shell commands with the " +
  "terminal tool and read and write files in your working folder, and send a file to the chat " +
  "with send_file. Files the user sends are saved under inbox/ in your working folder. Be " +
  "concise: replies are read in a chat window.";

export function createAgentParts(
  config: Config,
  logger: Logger,
  onModelAttempt?: ModelAttemptObserver,
): AgentParts {
  const processes = createProcessRegistry();
  const sandbox = resolveSandbox(sandboxOptions(config));
  if (sandbox.mode === "failed") logger.error(`sandbox ${sandbox.detail}`);
  else if (sandbox.mode === "off" && sandbox.warning) logger.warn(sandbox.warning);
  else logger.info(`sandbox ${sandbox.detail}`);
  const view = sandboxView(sandbox);
  // The home holds the gateway's secrets; only its workspace is open, wherever agent.cwd is.
  const guard = createHomeGuard(config.home);
  // The gateway hands over its schedule book once its store exists (bindSchedules).
  let schedules: ScheduleBook | null = null;
  // MCP servers connect when the gateway starts (AgentParts.mcp); their tools join each turn.
  const mcp =
    Object.keys(config.mcp.servers).length > 0
      ? new McpHub({
          servers: config.mcp.servers,
          baseEnv: config.toolEnv,
          cwd: config.cwd,
          logger: logger.child({ component: "mcp" }),
          callTimeoutMs: config.agent.tool_timeout * 1000,
        })
      : undefined;
  const web = createWebTools(config.tools.web, { filesDir: join(config.home, "files") });
  const tools = createToolRegistry(
    [
      createTerminalTool({
        defaultTimeoutMs: config.agent.tool_timeout * 1000,
        processes,
        env: config.toolEnv,
        sandbox,
      }),
      createReadFileTool({ guard }),
      createWriteFileTool({ guard, ...(view && { sandbox: view }) }),
      createScheduleTool(() => schedules, Date.now),
      createSendFileTool({
        guard,
        filesDir: join(config.home, "files"),
        ...(view && { sandbox: view }),
      }),
      createMemoryTool(config.home),
      ...web.tools,
    ],
    mcp && (() => mcp.tools()),
  );
  const bindSchedules = (book: ScheduleBook) => {
    schedules = book;
  };
  const isReadOnlyTool = (name: string) => tools.get(name)?.readOnly ?? false;
  const killToolProcesses = () => {
    void mcp?.close();
    void web.close();
    return processes.killAll();
  };
  const { base_url, name } = config.model;
  if (!base_url || !name) {
    logger.warn("no model configured: chat messages will be answered with how to configure one");
    return {
      agent: null,
      isReadOnlyTool,
      killToolProcesses,
      bindSchedules,
      sandbox,
      ...(mcp && { mcp }),
    };
  }
  mkdirSync(config.cwd, { recursive: true });
  const models = new ModelStack(config, logger, {
    ...(onModelAttempt && { onAttempt: onModelAttempt }),
  });
  // Learned once per process: after the endpoint refused images, images go as notes.
  const imageState = { refused: false };
  const basePrompt = [BASE_PROMPT, `Working folder: ${config.cwd}.`, config.agent.system_prompt]
    .filter(Boolean)
    .join("\n\n");
  return {
    isReadOnlyTool,
    killToolProcesses,
    bindSchedules,
    sandbox,
    models,
    ...(mcp && { mcp }),
    agent: async (input) => {
      const preferred = input.preferredModel ?? null;
      // Read at the start of each turn: a change the memory tool makes shows from the next turn.
      const memory = input.memoryUser
        ? memoryPromptBlock(new MemoryFile(config.home, input.memoryUser).read())
        : "";
      const keeper =
        input.sessionId && input.compactionSink
          ? await models.keeper(
              {
                sessionId: input.sessionId,
                summary: input.summary ?? null,
                sink: input.compactionSink,
                preferred,
              },
              logger,
            )
          : undefined;
      return runAgentLoop({
        llm: withImageInput(
          { complete: (request) => models.complete(request, input.sessionId) },
          {
            vision: config.model.vision,
            state: imageState,
            ...(input.onImagesRefused && { onImagesRefused: input.onImagesRefused }),
          },
        ),
        tools,
        systemPrompt: [basePrompt, memory].filter(Boolean).join("\n\n"),
        ...(keeper && { keeper }),
        ...(preferred && { preferredModel: preferred }),
        memoryUser: input.memoryUser ?? null,
        sessionId: input.sessionId ?? null,
        history: input.history,
        maxIterations: config.agent.max_iterations,
        cwd: config.cwd,
        signal: input.signal,
        journal: input.journal,
        onEvent: input.onEvent,
        takeSteeredInput: input.takeSteeredInput,
        chat: input.chat ?? null,
        ...(input.gate && { gate: input.gate }),
        ...(input.modelGate && { modelGate: input.modelGate }),
        ...(input.clientTools?.length && { clientTools: input.clientTools }),
      });
    },
  };
}
