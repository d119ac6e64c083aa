/**
 * Which tool calls need a human (`tools.approval`, `mcp.servers.<name>.approval`), and the rule
 * that names the answer `approve_session` grants. Pure: no store, no clock.
 */
import type { Tool } from "../agent/tools/tool.js";
import type { ToolCall } from "../agent/types.js";
import type { APPROVAL_MODES } from "../config/schema.js";
import { type CommandPolicy, classifyCommand } from "./dangerous-command.js";

export type ApprovalMode = (typeof APPROVAL_MODES)[number];

/** A call that must wait: the rule it falls under, why, and what to show the human. */
export interface ApprovalNeed {
  rule: string;
  reason: string;
  summary: string;
}

export interface ApprovalPolicy {
  /** `tools.approval`, for the built-in tools. */
  mode: ApprovalMode;
  commands: CommandPolicy;
}

/** Compiles the config's pattern lists (validated as regular expressions when loaded). */
export function createApprovalPolicy(tools: {
  approval: ApprovalMode;
  dangerous_patterns: readonly string[];
  allow_patterns: readonly string[];
}): ApprovalPolicy {
  return {
    mode: tools.approval,
    commands: {
      dangerous: tools.dangerous_patterns.map((source) => new RegExp(source)),
      allow: tools.allow_patterns.map((source) => new RegExp(source)),
    },
  };
}

const SUMMARY_MAX_CHARS = 600;

/**
 * Null when the call may run now. MCP tools follow their server's `approval` (`dangerous`: ask
 * unless the server marks the tool read-only); `terminal` commands follow `tools.approval`;
 * in `always` mode every other tool that is not read-only asks too.
 */
export function approvalNeed(
  policy: ApprovalPolicy,
  call: ToolCall,
  tool: Tool | undefined,
): ApprovalNeed | null {
  if (!tool) return null;
  // Stepping outside the sandbox always asks, whatever the mode (tools.sandbox).
  const outside = tool.outsideSandbox?.(call.function.arguments);
  if (outside) return { ...outside, summary: clip(outside.summary) };
  const name = call.function.name;
  if (tool.approval !== undefined) {
    if (tool.approval === "off" || (tool.approval === "dangerous" && tool.readOnly)) return null;
    return {
      rule: `tool:${name}`,
      reason:
        tool.approval === "always" ? "its server asks before every call" : "it may change things",
      summary: clip(`${name} ${call.function.arguments || "{}"}`),
    };
  }
  if (policy.mode === "off") return null;
  if (name === "terminal") {
    const command = commandOf(call);
    const match = classifyCommand(command, policy.commands);
    if (match)
      return { rule: `terminal:${match.rule}`, reason: match.reason, summary: clip(command) };
    if (policy.mode !== "always") return null;
    const program = command.trim().split(/\s+/)[0] ?? "";
    return {
      rule: `terminal:program:${program}`,
      reason: "every command is asked about",
      summary: clip(command),
    };
  }
  if (policy.mode === "always" && !tool.readOnly) {
    return {
      rule: `tool:${name}`,
      reason: "every tool call is asked about",
      summary: clip(`${name} ${call.function.arguments || "{}"}`),
    };
  }
  return null;
}

function commandOf(call: ToolCall): string {
  try {
    const args = JSON.parse(call.function.arguments || "{}") as { command?: unknown };
    return typeof args.command === "string" ? args.command : call.function.arguments;
  } catch {
    return call.function.arguments;
  }
}

function clip(text: string): string {
  return text.length > SUMMARY_MAX_CHARS ? `${text.slice(0, SUMMARY_MAX_CHARS)}…` : text;
}
