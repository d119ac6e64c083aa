import { z } from "zod";
import type { SandboxStep, Tool, ToolContext, ToolOutput } from "./tool.js";

/** What a tool implementation provides; `run` receives arguments already validated by `schema`. */
export interface ToolDefinition<Schema extends z.ZodType> {
  name: string;
  description: string;
  schema: Schema;
  readOnly: boolean;
  run(args: z.output<Schema>, context: ToolContext): Promise<ToolOutput>;
  /** See {@link Tool.outsideSandbox}; called with arguments already validated by `schema`. */
  outsideSandbox?(args: z.output<Schema>): SandboxStep | null;
}

/**
 * Builds a {@link Tool} from a zod schema: `parameters` is the schema as JSON Schema, and
 * `execute` accepts an object or a JSON string, validates it, and turns invalid arguments and
 * thrown errors into an `isError` output the model can read. `execute` never throws.
 */
export function defineTool<Schema extends z.ZodType>(definition: ToolDefinition<Schema>): Tool {
  const { $schema: _dialect, ...parameters } = z.toJSONSchema(definition.schema, { io: "input" });
  const { outsideSandbox } = definition;
  return {
    name: definition.name,
    description: definition.description,
    parameters,
    readOnly: definition.readOnly,
    ...(outsideSandbox && {
      // Arguments that do not parse step nowhere: the call fails with the validation error.
      outsideSandbox(args: unknown): SandboxStep | null {
        const parsed = definition.schema.safeParse(parseArguments(args));
        return parsed.success ? outsideSandbox(parsed.data) : null;
      },
    }),
    async execute(args: unknown, context: ToolContext): Promise<ToolOutput> {
      let input = args;
      if (typeof args === "string") {
        try {
          input = JSON.parse(args);
        } catch {
          return toolError(`The arguments for ${definition.name} are not valid JSON.`);
        }
      }
      const parsed = definition.schema.safeParse(input);
      if (!parsed.success) {
        return toolError(
          `Invalid arguments for ${definition.name}:\n${z.prettifyError(parsed.error)}`,
        );
      }
      try {
        return await definition.run(parsed.data, context);
      } catch (error) {
        return toolError(`${definition.name} failed: ${errorText(error)}`);
      }
    },
  };
}

function parseArguments(args: unknown): unknown {
  if (typeof args !== "string") return args;
  try {
    return JSON.parse(args || "{}");
  } catch {
    return undefined;
  }
}

/** An error result for the model. */
export function toolError(output: string): ToolOutput {
  return { output, isError: true };
}

/** A short description of a thrown value: the Node error code when there is one, else the message. */
export function errorText(error: unknown): string {
  if (error instanceof Error) {
    const code = (error as NodeJS.ErrnoException).code;
    return code ? `${code} (${error.message})` : error.message;
  }
  return String(error);
}
