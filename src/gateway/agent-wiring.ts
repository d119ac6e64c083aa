/**
 * Builds the agent's parts from the config: the tools (sandbox, home guard, MCP servers, web),
 * the model client and the context side of the models, and the agent (src/agent/agent.ts) whose
 * turn the runner calls.
 */

import { mkdirSync } from "node:fs";
import { join } from "node:path";
import type { Logger } from "pino";
import { Agent } from "../agent/agent.js";
import { type ModelAttemptObserver, ModelClient } from "../agent/model-client.js";
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
import { ModelStack } from "../context/model-stack.js";
import { McpHub } from "../mcp/mcp-hub.js";
import { MemoryFile, memoryPromptBlock } from "../memory/memory-file.js";
import { createMemoryTool } from "../memory/memory-tool.js";
import type { AgentRun, IsReadOnlyTool } from "../runner/agent-run.js";
import type { ScheduleBook } from "../schedules/book.js";
import { createScheduleTool } from "../schedules/schedule-tool.js";
import { createDelegateTool } from "../tasks/delegate-tool.js";
import type { Tasks } from "../tasks/task-manager.js";

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
  /** Gives the agent's `delegate` tool the gateway's tasks. */
  bindTasks?(tasks: Tasks): void;
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
  const { tools, sandbox, mcp, bindSchedules, bindTasks, killToolProcesses } = createTools(
    config,
    logger,
  );
  const parts = {
    isReadOnlyTool: (name: string) => tools.get(name)?.readOnly ?? false,
    killToolProcesses,
    bindSchedules,
    bindTasks,
    sandbox,
    ...(mcp && { mcp }),
  };
  const { base_url, name } = config.model;
  if (!base_url || !name) {
    logger.warn("no model configured: chat messages will be answered with how to configure one");
    return { ...parts, agent: null };
  }
  mkdirSync(config.cwd, { recursive: true });
  const client = new ModelClient(config.model, logger, {
    ...(onModelAttempt && { onAttempt: onModelAttempt }),
  });
  const models = new ModelStack(config, client);
  const agent = new Agent({
    model: client,
    tools,
    basePrompt: [BASE_PROMPT, `Working folder: ${config.cwd}.`, config.agent.system_prompt]
      .filter(Boolean)
      .join("\n\n"),
    vision: config.model.vision,
    maxIterations: config.agent.max_iterations,
    cwd: config.cwd,
    memory: (user) => memoryPromptBlock(new MemoryFile(config.home, user).read()),
    keeper: (request) => models.keeper(request, logger),
  });
  return { ...parts, models, agent: (input) => agent.runTurn(input) };
}

/** The agent's tools as the config chooses them: sandboxed commands, files, web, MCP servers. */
function createTools(config: Config, logger: Logger) {
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
  let tasks: Tasks | null = null;
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
      createDelegateTool(() => tasks),
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
  const bindTasks = (manager: Tasks) => {
    tasks = manager;
  };
  const killToolProcesses = () => {
    void mcp?.close();
    void web.close();
    return processes.killAll();
  };
  return { tools, sandbox, mcp, bindSchedules, bindTasks, killToolProcesses };
}
