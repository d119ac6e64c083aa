/** Every user-facing text of the runner in one place (tests pin several verbatim). */
export const TEXT = {
  noModel:
    "No model is configured yet. Run `keel setup` on the gateway's machine, or set model.base_url and model.name in $KEEL_HOME/config.yaml " +
    "(or OPENAI_BASE_URL and KEEL_MODEL), then restart Keel. Any OpenAI-compatible server works: " +
    "vLLM, llama.cpp, Ollama, OpenRouter.",
  queued: "⏳ Queued — I'll get to this as soon as the current task finishes.",
  stopped: "⏹ Stopped.",
  nothingToStop: "Nothing is running.",
  stopElsewhere:
    "This conversation's task is running on another gateway sharing the store, which this /stop cannot reach; its answer will still come.",
  newSession: "✨ New session started.",
  nothingToRetry: "There is no earlier message to retry.",
  stale:
    "ℹ️ Your previous task was interrupted too long ago to continue by itself; starting from your new message.",
  help: [
    "Commands:",
    "/new — start a fresh session",
    "/stop — interrupt the running task, keep the session",
    "/retry — run your last message again",
    "/restart — restart the gateway",
    "/status — what this session is doing",
    "/sethome — make this chat the home channel for gateway notices",
    "/schedules — scheduled tasks reporting to this chat (pause, resume, delete by number)",
    "/usage — tokens used and how full the context is",
    "/compact — summarise older messages now to free context",
    "/model [name] — list the models, or switch this session to one",
    "/memory — what the agent remembers about you",
    "/approve [id] [session] — run the command waiting for approval (session: allow its kind for the session)",
    "/deny [id] — do not run it; the agent is told",
    "/help — this list",
  ].join("\n"),
  operatorOnly: (name: string) =>
    `⛔ /${name} acts on the whole gateway and needs operator rights: the web chat, \`keel chat\`, ` +
    "a request with the control token, or a user in a chat platform's admin_users (admin_senders for email). Nothing was done.",
  unknownCommand: (name: string) =>
    `Unknown command /${name}. Send /help for the list of commands.`,
} as const;

/** Tool result recorded for a tool call cut off by a crash or restart. */
export const UNKNOWN_OUTCOME =
  "[Keel: the gateway restarted while this tool call was running. Its outcome is unknown: it may " +
  "have completed, partly completed, or not run. Check the current state before repeating it.]";
