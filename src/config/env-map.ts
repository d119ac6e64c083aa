/** Which environment variable overrides which config key (README.md, "Configuration"). */
export interface EnvBinding {
  env: string;
  path: readonly string[];
  kind: "string" | "number" | "boolean" | "list";
}

export const ENV_BINDINGS: readonly EnvBinding[] = [
  { env: "OPENAI_BASE_URL", path: ["model", "base_url"], kind: "string" },
  { env: "OPENAI_API_KEY", path: ["model", "api_key"], kind: "string" },
  { env: "KEEL_MODEL", path: ["model", "name"], kind: "string" },
  { env: "KEEL_CONTEXT_WINDOW", path: ["model", "context_window"], kind: "number" },
  { env: "KEEL_MAX_ITERATIONS", path: ["agent", "max_iterations"], kind: "number" },
  { env: "KEEL_RESTART_DRAIN_TIMEOUT", path: ["agent", "restart_drain_timeout"], kind: "number" },
  { env: "KEEL_AUTO_RESUME_FRESHNESS", path: ["agent", "auto_resume_freshness"], kind: "number" },
  { env: "KEEL_GATEWAY_BUSY_INPUT_MODE", path: ["display", "busy_input_mode"], kind: "string" },
  { env: "KEEL_AGENT_CWD", path: ["agent", "cwd"], kind: "string" },
  { env: "KEEL_AGENT_ENV_PASSTHROUGH", path: ["agent", "env_passthrough"], kind: "list" },
  { env: "KEEL_HTTP_HOST", path: ["http", "host"], kind: "string" },
  { env: "KEEL_HTTP_PORT", path: ["http", "port"], kind: "number" },
  { env: "KEEL_HTTP_TRUST_LOOPBACK", path: ["http", "trust_loopback"], kind: "boolean" },
  { env: "KEEL_HTTP_PUBLIC_HOSTS", path: ["http", "public_hosts"], kind: "list" },
  { env: "KEEL_CONTROL_TOKEN", path: ["control", "token"], kind: "string" },
  { env: "KEEL_METRICS_TOKEN", path: ["metrics", "token"], kind: "string" },
  { env: "KEEL_OTLP_ENDPOINT", path: ["telemetry", "otlp_endpoint"], kind: "string" },
  { env: "KEEL_API_ENABLED", path: ["platforms", "api", "enabled"], kind: "boolean" },
  { env: "KEEL_API_KEY", path: ["platforms", "api", "key"], kind: "string" },
  { env: "KEEL_WEBCHAT_ENABLED", path: ["platforms", "webchat", "enabled"], kind: "boolean" },
  { env: "TELEGRAM_BOT_TOKEN", path: ["platforms", "telegram", "token"], kind: "string" },
  { env: "TELEGRAM_API_ROOT", path: ["platforms", "telegram", "api_root"], kind: "string" },
  { env: "TELEGRAM_ALLOWED_USERS", path: ["platforms", "telegram", "allowed_users"], kind: "list" },
  { env: "TELEGRAM_ADMIN_USERS", path: ["platforms", "telegram", "admin_users"], kind: "list" },
  { env: "TELEGRAM_HOME_CHANNEL", path: ["platforms", "telegram", "home_channel"], kind: "string" },
  { env: "DISCORD_BOT_TOKEN", path: ["platforms", "discord", "token"], kind: "string" },
  { env: "DISCORD_API_ROOT", path: ["platforms", "discord", "api_root"], kind: "string" },
  { env: "DISCORD_ALLOWED_USERS", path: ["platforms", "discord", "allowed_users"], kind: "list" },
  { env: "DISCORD_ADMIN_USERS", path: ["platforms", "discord", "admin_users"], kind: "list" },
  { env: "DISCORD_HOME_CHANNEL", path: ["platforms", "discord", "home_channel"], kind: "string" },
  { env: "SLACK_APP_TOKEN", path: ["platforms", "slack", "app_token"], kind: "string" },
  { env: "SLACK_BOT_TOKEN", path: ["platforms", "slack", "bot_token"], kind: "string" },
  { env: "SLACK_API_ROOT", path: ["platforms", "slack", "api_root"], kind: "string" },
  { env: "SLACK_ALLOWED_USERS", path: ["platforms", "slack", "allowed_users"], kind: "list" },
  { env: "SLACK_ADMIN_USERS", path: ["platforms", "slack", "admin_users"], kind: "list" },
  { env: "SLACK_HOME_CHANNEL", path: ["platforms", "slack", "home_channel"], kind: "string" },
  { env: "MATRIX_HOMESERVER", path: ["platforms", "matrix", "homeserver"], kind: "string" },
  { env: "MATRIX_USER_ID", path: ["platforms", "matrix", "user_id"], kind: "string" },
  { env: "MATRIX_ACCESS_TOKEN", path: ["platforms", "matrix", "access_token"], kind: "string" },
  { env: "MATRIX_ALLOWED_USERS", path: ["platforms", "matrix", "allowed_users"], kind: "list" },
  { env: "MATRIX_ADMIN_USERS", path: ["platforms", "matrix", "admin_users"], kind: "list" },
  {
    env: "WHATSAPP_PHONE_NUMBER_ID",
    path: ["platforms", "whatsapp", "phone_number_id"],
    kind: "string",
  },
  { env: "WHATSAPP_ACCESS_TOKEN", path: ["platforms", "whatsapp", "access_token"], kind: "string" },
  { env: "WHATSAPP_APP_SECRET", path: ["platforms", "whatsapp", "app_secret"], kind: "string" },
  { env: "WHATSAPP_VERIFY_TOKEN", path: ["platforms", "whatsapp", "verify_token"], kind: "string" },
  { env: "WHATSAPP_API_ROOT", path: ["platforms", "whatsapp", "api_root"], kind: "string" },
  { env: "WHATSAPP_ALLOWED_USERS", path: ["platforms", "whatsapp", "allowed_users"], kind: "list" },
  { env: "WHATSAPP_ADMIN_USERS", path: ["platforms", "whatsapp", "admin_users"], kind: "list" },
  { env: "EMAIL_IMAP_HOST", path: ["platforms", "email", "imap", "host"], kind: "string" },
  { env: "EMAIL_IMAP_PORT", path: ["platforms", "email", "imap", "port"], kind: "number" },
  { env: "EMAIL_IMAP_USER", path: ["platforms", "email", "imap", "user"], kind: "string" },
  { env: "EMAIL_IMAP_PASSWORD", path: ["platforms", "email", "imap", "password"], kind: "string" },
  { env: "EMAIL_IMAP_TLS", path: ["platforms", "email", "imap", "tls"], kind: "boolean" },
  { env: "EMAIL_SMTP_HOST", path: ["platforms", "email", "smtp", "host"], kind: "string" },
  { env: "EMAIL_SMTP_PORT", path: ["platforms", "email", "smtp", "port"], kind: "number" },
  { env: "EMAIL_SMTP_USER", path: ["platforms", "email", "smtp", "user"], kind: "string" },
  { env: "EMAIL_SMTP_PASSWORD", path: ["platforms", "email", "smtp", "password"], kind: "string" },
  { env: "EMAIL_SMTP_TLS", path: ["platforms", "email", "smtp", "tls"], kind: "boolean" },
  { env: "EMAIL_IMAP_FOLDER", path: ["platforms", "email", "imap", "folder"], kind: "string" },
  { env: "EMAIL_ADDRESS", path: ["platforms", "email", "address"], kind: "string" },
  { env: "EMAIL_ALLOWED_SENDERS", path: ["platforms", "email", "allowed_senders"], kind: "list" },
  { env: "EMAIL_ADMIN_SENDERS", path: ["platforms", "email", "admin_senders"], kind: "list" },
  { env: "KEEL_DATABASE_URL", path: ["store", "url"], kind: "string" },
  { env: "KEEL_LEASE_TTL", path: ["cluster", "lease_ttl"], kind: "number" },
  { env: "KEEL_INSTANCE_ID", path: ["cluster", "instance_id"], kind: "string" },
  { env: "KEEL_ALERTS_WEBHOOK", path: ["alerts", "webhook"], kind: "string" },
  { env: "KEEL_ALERTS_CHAT", path: ["alerts", "chat"], kind: "string" },
  { env: "KEEL_ALERTS_AFTER", path: ["alerts", "after"], kind: "number" },
  { env: "KEEL_ALERTS_HEARTBEAT_URL", path: ["alerts", "heartbeat_url"], kind: "string" },
  { env: "KEEL_ALERTS_HEARTBEAT_EVERY", path: ["alerts", "heartbeat_every"], kind: "number" },
  { env: "KEEL_LOG_LEVEL", path: ["logging", "level"], kind: "string" },
];

/** Converts an env string to the key's type; a bad number stays a string so the schema names it. */
export function coerceEnvValue(raw: string, kind: EnvBinding["kind"]): unknown {
  switch (kind) {
    case "number": {
      const n = Number(raw.trim());
      return raw.trim() !== "" && Number.isFinite(n) ? n : raw;
    }
    case "boolean": {
      const v = raw.trim().toLowerCase();
      if (["1", "true", "yes", "on"].includes(v)) return true;
      if (["0", "false", "no", "off"].includes(v)) return false;
      return raw;
    }
    case "list":
      return raw
        .split(",")
        .map((s) => s.trim())
        .filter((s) => s !== "");
    default:
      return raw;
  }
}
