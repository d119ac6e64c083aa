/** Operational errors with a stable code; messages say what to do and never carry secrets. */
export class GatewayError extends Error {
  constructor(
    readonly code: string,
    message: string,
    readonly status = 500,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = "GatewayError";
  }
}

/** The configuration is unusable; `issues` lists every problem with its key. Exit code 78. */
export class ConfigError extends GatewayError {
  constructor(
    readonly file: string | null,
    readonly issues: string[],
  ) {
    super(
      "CONFIG_INVALID",
      `Invalid configuration${file ? ` in ${file}` : ""}:\n  ${issues.join("\n  ")}`,
    );
    this.name = "ConfigError";
  }
}

/** Short message of any thrown value, for logs and user-facing errors. */
export function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
