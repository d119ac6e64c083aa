import type { ChatAddress, OutboundFile } from "../../contract/platform.js";

/** A tool the agent can call. `execute` never throws for expected failures: it returns isError. */
export interface Tool {
  name: string;
  description: string;
  /** JSON Schema of the arguments object, sent to the model as-is. */
  parameters: Record<string, unknown>;
  /** Read-only tools may be re-run after a crash; others never are (see the tool-call journal). */
  readOnly: boolean;
  /**
   * The approval rule of a tool from an MCP server (its server's `approval` setting); built-in
   * tools leave it out and follow `tools.approval`.
   */
  approval?: "off" | "dangerous" | "always";
  /**
   * Why this call of a built-in tool waits under `tools.approval: dangerous` (a browser action
   * that submits a form), or null; for tools whose risk depends on the arguments.
   */
  dangerReason?(args: unknown): string | null;
  /**
   * Set by tools the sandbox confines (`tools.sandbox`): a call that would step outside it (a
   * command with `sandbox: false`, a write outside the writable roots) returns what to ask a
   * human, who must approve it whatever `tools.approval` says; null when it stays inside.
   * `args` is the call's raw arguments (a JSON string or an object).
   */
  outsideSandbox?(args: unknown): SandboxStep | null;
  execute(args: unknown, context: ToolContext): Promise<ToolOutput>;
}

/** A call that steps outside the sandbox: the approval rule it falls under, why, what to show. */
export interface SandboxStep {
  rule: string;
  reason: string;
  summary: string;
}

export interface ToolContext {
  /** Working folder of the agent (config `agent.cwd`). */
  cwd: string;
  /** Aborted when the turn is interrupted or the gateway stops: kill what you started. */
  signal: AbortSignal;
  /** The chat the turn answers, when there is one (the `schedule` tool reports there). */
  chat?: ChatAddress | null;
  /** Whose memory file the `memory` tool edits (`<platform>-<user id>`): the turn's sender. */
  memoryUser?: string | null;
  /** The session the turn belongs to (the `browser` tool keeps one browser context per session). */
  sessionId?: string | null;
  /** The session key of the turn and who started it (`<platform>:<user id>`), when known. */
  sessionKey?: string | null;
  requester?: string | null;
  /** This call's id (the `delegate` tool asks for one task per call, even when re-run). */
  toolCallId?: string;
}

export interface ToolOutput {
  output: string;
  isError: boolean;
  /** A file the tool sends to the chat (`send_file`): queued with the result, atomically. */
  sentFile?: { file: OutboundFile; caption: string };
}
