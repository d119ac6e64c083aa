/** A tool the agent can call. `execute` never throws for expected failures: it returns isError. */
export interface Tool {
  name: string;
  description: string;
  /** JSON Schema of the arguments object, sent to the model as-is. */
  parameters: Record<string, unknown>;
  /** Read-only tools may be re-run after a crash; others never are (see the tool-call journal). */
  readOnly: boolean;
  execute(args: unknown, context: ToolContext): Promise<ToolOutput>;
}

export interface ToolContext {
  /** Working folder of the agent (config `agent.cwd`). */
  cwd: string;
  /** Aborted when the turn is interrupted or the gateway stops: kill what you started. */
  signal: AbortSignal;
}

export interface ToolOutput {
  output: string;
  isError: boolean;
}
