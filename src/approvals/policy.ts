/**
 * Which tool calls need a human (`tools.approval`, `mcp.servers.<name>.approval`), and the grant
 * units an "approve for session" gives. Pure: no store, no clock.
 */
import type { Tool } from "../agent/tools/tool.js";
import type { ToolCall } from "../agent/types.js";
import type { APPROVAL_MODES } from "../config/schema.js";
import { type CommandPolicy, judgeCommand } from "./dangerous-command.js";
import type { ShellParser } from "./shell-syntax.js";

export type ApprovalMode = (typeof APPROVAL_MODES)[number];

/** A call that must wait: the rule it falls under, why, and what to show the human. */
export interface ApprovalNeed {
  rule: string;
  reason: string;
  /** The call as it will run, whole (the card shows it; texts.ts makes it readable). */
  summary: string;
  /**
   * What "approve for session" grants, to the asker only: each normalized simple command that
   * needed asking (`terminal:cmd:rm -rf build`; read-only programs `terminal:cmd:git status`),
   * or `tool:<name>`. The call runs unasked later only when the asker holds every one.
   */
  grants: string[];
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

/**
 * Null when the call may run now. MCP tools follow their server's `approval` (`dangerous`: ask
 * unless the server marks the tool read-only); `terminal` commands follow `tools.approval`;
 * in `always` mode every other tool that is not read-only asks too. `shell` is null when the
 * shell grammar could not be loaded: then every command asks (fail closed).
 */
export function approvalNeed(
  policy: ApprovalPolicy,
  call: ToolCall,
  tool: Tool | undefined,
  shell: ShellParser | null,
): ApprovalNeed | null {
  if (!tool) return null;
  // Stepping outside the sandbox always asks, whatever the mode (tools.sandbox).
  const outside = tool.outsideSandbox?.(call.function.arguments);
  // Its grant is that one step (the exact command, or the path): nothing wider.
  if (outside) return { ...outside, grants: [outside.rule] };
  const name = call.function.name;
  const toolNeed = (reason: string): ApprovalNeed => ({
    rule: `tool:${name}`,
    reason,
    summary: `${name} ${call.function.arguments || "{}"}`,
    grants: [`tool:${name}`],
  });
  if (tool.approval !== undefined) {
    if (tool.approval === "off" || (tool.approval === "dangerous" && tool.readOnly)) return null;
    return toolNeed(
      tool.approval === "always" ? "its server asks before every call" : "it may change things",
    );
  }
  if (policy.mode === "off") return null;
  if (name === "terminal") return terminalNeed(policy, commandOf(call), shell);
  const danger = tool.dangerReason?.(argumentsOf(call));
  if (danger) return toolNeed(danger);
  if (policy.mode === "always" && !tool.readOnly) {
    return toolNeed("every tool call is asked about");
  }
  return null;
}

function terminalNeed(
  policy: ApprovalPolicy,
  command: string,
  shell: ShellParser | null,
): ApprovalNeed | null {
  if (!shell) {
    return {
      rule: "terminal:unparsed",
      reason: "the shell grammar could not be loaded, so every command is asked about",
      summary: command,
      grants: [`terminal:text:${command}`],
    };
  }
  const judged = judgeCommand(shell, command, policy.commands);
  const grants = new Set(judged.dangers.map((d) => `terminal:${d.grant}`));
  if (judged.dangers.length > 0) {
    const reasons = [...new Set(judged.dangers.map((d) => d.reason))];
    return {
      rule: `terminal:${judged.dangers[0]!.rule}`,
      reason: reasons.join("; "),
      summary: command,
      grants: [...grants],
    };
  }
  if (policy.mode !== "always") return null;
  for (const unit of judged.commands) grants.add(`terminal:${unit}`);
  if (grants.size === 0) grants.add(`terminal:text:${command}`);
  return {
    rule: "terminal:always",
    reason: "every command is asked about",
    summary: command,
    grants: [...grants],
  };
}

function commandOf(call: ToolCall): string {
  try {
    const args = JSON.parse(call.function.arguments || "{}") as { command?: unknown };
    return typeof args.command === "string" ? args.command : call.function.arguments;
  } catch {
    return call.function.arguments;
  }
}

function argumentsOf(call: ToolCall): unknown {
  try {
    return JSON.parse(call.function.arguments || "{}");
  } catch {
    return {};
  }
}
