/** Builds the agent from the config: model client, tools, and the turn function the runner calls. */

import { mkdirSync } from "node:fs";
import type { Logger } from "pino";
import { runTurn } from "../agent/agent-loop.js";
import { createLlmClient } from "../agent/llm-client.js";
import { createToolRegistry } from "../agent/tools/index.js";
import { createProcessRegistry } from "../agent/tools/process-registry.js";
import { createReadFileTool } from "../agent/tools/read-file.js";
import { createTerminalTool } from "../agent/tools/terminal.js";
import { createWriteFileTool } from "../agent/tools/write-file.js";
import type { Config } from "../config/schema.js";
import type { AgentParts } from "./gateway.js";

const BASE_PROMPT =
  "You are Keel's agent, reached through a chat platform. You can run shell commands with the " +
  "terminal tool and read and write files in your working folder. Be concise: replies are read " +
  "in a chat window.";

export function createAgentParts(config: Config, logger: Logger): AgentParts {
  const processes = createProcessRegistry();
  const tools = createToolRegistry([
    createTerminalTool({ defaultTimeoutMs: config.agent.tool_timeout * 1000, processes }),
    createReadFileTool(),
    createWriteFileTool(),
  ]);
  const isReadOnlyTool = (name: string) => tools.get(name)?.readOnly ?? false;
  const killToolProcesses = () => processes.killAll();
  const { base_url, name, api_key, timeout_seconds } = config.model;
  if (!base_url || !name) {
    logger.warn("no model configured: chat messages will be answered with how to configure one");
    return { agent: null, isReadOnlyTool, killToolProcesses };
  }
  mkdirSync(config.cwd, { recursive: true });
  const llm = createLlmClient({
    baseUrl: base_url,
    apiKey: api_key ?? "none",
    model: name,
    timeoutMs: timeout_seconds * 1000,
  });
  const systemPrompt = [BASE_PROMPT, `Working folder: ${config.cwd}.`, config.agent.system_prompt]
    .filter(Boolean)
    .join("\n\n");
  return {
    isReadOnlyTool,
    killToolProcesses,
    agent: (input) =>
      runTurn({
        llm,
        tools,
        systemPrompt,
        history: input.history,
        maxIterations: config.agent.max_iterations,
        cwd: config.cwd,
        signal: input.signal,
        journal: input.journal,
        onEvent: input.onEvent,
        takeSteeredInput: input.takeSteeredInput,
      }),
  };
}
