/**
 * Operational errors with a stable code; messages say what to do and never carry secrets. Over
 * HTTP, `status` and `headers` go with the answer (src/control/http-errors.ts renders them).
 */
export class GatewayError extends Error {
  readonly headers: Readonly<Record<string, string>>;

  constructor(
    readonly code: string,
    message: string,
    readonly status = 500,
    options?: { cause?: unknown; headers?: Record<string, string> },
  ) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = "GatewayError";
    this.headers = options?.headers ?? {};
  }
}

/** An error told in OpenAI's shape (the `/v1` API): `{ error: { message, type, param, code } }`. */
export class OpenAiError extends GatewayError {
  constructor(
    readonly type: string,
    readonly openAiCode: string | null,
    message: string,
    status: number,
    options?: { headers?: Record<string, string>; param?: string },
  ) {
    super(openAiCode ?? type, message, status, options);
    this.name = "OpenAiError";
    this.param = options?.param ?? null;
  }

  /** The request field at fault, when one is. */
  readonly param: string | null;

  body(): { error: { message: string; type: string; param: string | null; code: string | null } } {
    return {
      error: { message: this.message, type: this.type, param: this.param, code: this.openAiCode },
    };
  }
}

/**
 * The configuration is unusable; `issues` lists every problem with its key. Exit code 78.
 * `subject` "home": the Keel home itself is unsafe to use (another user's, or writable by others).
 */
export class ConfigError extends GatewayError {
  constructor(
    readonly file: string | null,
    readonly issues: string[],
    readonly subject: "config" | "home" = "config",
  ) {
    const heading = subject === "home" ? "Unsafe Keel home" : "Invalid configuration";
    super("CONFIG_INVALID", `${heading}${file ? ` in ${file}` : ""}:\n  ${issues.join("\n  ")}`);
    this.name = "ConfigError";
  }
}

/** Short message of any thrown value, for logs and user-facing errors. */
export function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
