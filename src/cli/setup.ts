/**
 * `keel setup`: the first run. Asks for the model endpoint and tests it (lists the models, sends
 * one request), optionally a Telegram bot token (tests `getMe`, explains pairing) and a WhatsApp
 * Cloud API number (tests the token, says where the webhook goes) and a Matrix bot account
 * (tests the token with whoami) and a mailbox (setup-email.ts: tests the IMAP and SMTP logins), says plainly
 * what the agent can do on this machine, and writes a commented `config.yaml` (mode 0600).
 * Plain prompts on stdin; every answer also has a flag, and `--yes` takes the defaults, so a
 * script can run it. An existing config.yaml is replaced only when the user says so (or `--force`).
 */
import { randomBytes } from "node:crypto";
import { chmodSync, existsSync, mkdirSync, renameSync, writeFileSync } from "node:fs";
import { userInfo } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { loadConfig, resolveHome } from "../config/load-config.js";
import { ConfigSchema } from "../config/schema.js";
import { ConfigError, errorMessage } from "../lib/errors.js";
import {
  probeCompletion,
  probeMatrix,
  probeModels,
  probeTelegram,
  probeWhatsapp,
} from "./endpoint-checks.js";
import { type CliIo, EXIT } from "./io.js";
import type { GlobalOptions } from "./load.js";
import { askEmail, type EmailAnswers, renderEmail } from "./setup-email.js";

export interface SetupOptions extends GlobalOptions {
  modelUrl?: string;
  model?: string;
  apiKey?: string;
  telegramToken?: string;
  yes?: boolean;
  force?: boolean;
}

const DEFAULT_MODEL_URL = "http://127.0.0.1:11434/v1";
const DEFAULT_TELEGRAM_ROOT = "https://api.telegram.org";
const DEFAULT_GRAPH_ROOT = "https://graph.facebook.com/";

/** What setup writes for WhatsApp (platforms.whatsapp). */
interface WhatsappAnswers {
  phoneNumberId: string;
  accessToken: string;
  appSecret: string;
  verifyToken: string;
  apiRoot: string;
}

export async function setup(options: SetupOptions, io: CliIo): Promise<number> {
  const home = resolveHome({
    ...(options.home !== undefined && { home: options.home }),
    env: io.env,
  });
  const file = join(home, "config.yaml");
  const ask = prompter(io, options.yes === true);
  try {
    io.out(`Keel setup: writes ${file}`);
    if (existsSync(file)) {
      if (options.yes && !options.force) {
        io.err(
          `${file} already exists; keel setup --yes never replaces it (add --force to do so).`,
        );
        return EXIT.failure;
      }
      if (!options.force && !(await ask.yesNo(`${file} exists. Replace it?`, false))) {
        io.out("Left the existing config.yaml alone.");
        return EXIT.ok;
      }
    }

    const model = await askModel(options, ask, io);
    if (model === "failed") return EXIT.failure;
    const { baseUrl, apiKey, name } = model;
    const telegram = await askTelegram(options, ask, io);
    if (telegram === "failed") return EXIT.failure;
    const { token, apiRoot } = telegram;

    // WhatsApp is optional too; its webhook needs a public HTTPS name, said here.
    const whatsapp = await askWhatsapp(ask, io);
    if (whatsapp === "failed") return EXIT.failure;
    const matrix = await askMatrix(ask, io);
    if (matrix === "failed") return EXIT.failure;
    const email = await askEmail(ask, io);
    if (email === "failed") return EXIT.failure;

    sayWhatTheAgentMayDo(home, io);
    if (!(await ask.yesNo("Write the configuration?", true))) {
      io.out("Nothing written.");
      return EXIT.ok;
    }

    mkdirSync(home, { recursive: true, mode: 0o700 });
    const text = renderConfig({
      baseUrl,
      name,
      apiKey,
      token,
      apiRoot,
      ...(whatsapp && { whatsapp }),
      ...(matrix && { matrix }),
      ...(email && { email }),
    });
    return writeConfig(file, home, text, io);
  } finally {
    ask.close();
  }
}

/** What the agent can do here, said before anything is written or runs. */
function sayWhatTheAgentMayDo(home: string, io: CliIo): void {
  const who = userInfo();
  io.out("");
  io.out(`⚠ The agent runs shell commands on this machine as ${who.username} (uid ${who.uid}),`);
  io.out(`  starting in ${join(home, "workspace")}, with everything this account may do.`);
  io.out(`  Approval mode: ${describeApprovalMode(defaultApprovalMode())}`);
  io.out(
    "  Only people you let in (web chat on 127.0.0.1, paired or allowed Telegram users) can reach it.",
  );
}

/** Writes config.yaml atomically (mode 0600) and refuses to leave one the gateway would refuse. */
function writeConfig(file: string, home: string, text: string, io: CliIo): number {
  const temp = `${file}.tmp-${process.pid}`;
  writeFileSync(temp, text, { mode: 0o600 });
  chmodSync(temp, 0o600);
  renameSync(temp, file);
  // Never leave a file behind that the gateway would refuse.
  try {
    loadConfig({ home, env: io.env });
  } catch (err) {
    io.err(`The written config does not load: ${errorMessage(err)}`);
    return err instanceof ConfigError ? EXIT.config : EXIT.failure;
  }
  io.out(`✓ Wrote ${file} (mode 0600).`);
  io.out(
    "Next: `keel doctor` to check everything, then `keel gateway start` (or `npm start` in the",
  );
  io.out("foreground) and `keel chat`, or `keel open` for the web chat in a browser.");
  return EXIT.ok;
}

/** The model endpoint: listed, then asked once, as the agent will ask it. */
async function askModel(
  options: SetupOptions,
  ask: ReturnType<typeof prompter>,
  io: CliIo,
): Promise<{ baseUrl: string; apiKey: string | undefined; name: string } | "failed"> {
  const baseUrl =
    options.modelUrl ??
    (await ask.text("Model endpoint (OpenAI-compatible, ending in /v1)", DEFAULT_MODEL_URL));
  const apiKey =
    options.apiKey ?? ((await ask.text("API key for it (empty for none)", "")) || undefined);
  const listed = await probeModels(baseUrl, apiKey);
  if (!listed.ok) {
    io.err(`✗ ${listed.detail}`);
    io.err("Start the model server (or fix the address) and run keel setup again.");
    return "failed";
  }
  const models = listed.models ?? [];
  io.out(`✓ ${listed.detail}${models.length ? `: ${models.slice(0, 8).join(", ")}` : ""}`);
  const name = options.model ?? (await ask.text("Model name", models[0] ?? ""));
  if (!name) {
    io.err("A model name is needed (--model NAME).");
    return "failed";
  }
  const answered = await probeCompletion(baseUrl, apiKey, name);
  if (!answered.ok) {
    io.err(`✗ ${answered.detail}`);
    return "failed";
  }
  io.out(`✓ ${answered.detail}`);
  return { baseUrl, apiKey, name };
}

/** Telegram, optional: a token is tested with getMe. */
async function askTelegram(
  options: SetupOptions,
  ask: ReturnType<typeof prompter>,
  io: CliIo,
): Promise<{ token: string | undefined; apiRoot: string } | "failed"> {
  const apiRoot = io.env.TELEGRAM_API_ROOT || DEFAULT_TELEGRAM_ROOT;
  const token =
    options.telegramToken ??
    ((await ask.text("Telegram bot token from @BotFather (empty to skip)", "")) || undefined);
  if (token) {
    const me = await probeTelegram(apiRoot, token);
    if (!me.ok) {
      io.err(`✗ ${me.detail}`);
      return "failed";
    }
    io.out(`✓ Telegram: ${me.detail}`);
    io.out(
      "  Nobody can talk to the bot yet. A new user gets a pairing code; let them in with `keel pairing approve CODE`,",
    );
    io.out("  or list trusted user ids under platforms.telegram.allowed_users in config.yaml.");
  }
  return { token, apiRoot };
}

/**
 * The approval mode a new config runs with: the schema's default for `tools.approval`, or "off"
 * while Keel has no approvals (then every command runs). Read from the schema so the sentence
 * setup prints follows the shipped default.
 */
export function defaultApprovalMode(): string {
  const defaults = ConfigSchema.parse({}) as { tools?: { approval?: unknown } };
  return typeof defaults.tools?.approval === "string" ? defaults.tools.approval : "off";
}

/** What an approval mode means for the person about to let the agent run. Pure. */
export function describeApprovalMode(mode: string): string {
  if (mode === "off") return "off — every command the model asks for runs without asking.";
  if (mode === "always") return "always — every command waits until you approve it (/approve).";
  if (mode === "dangerous") {
    return "dangerous — commands that look dangerous wait until you approve them (/approve); the rest run without asking.";
  }
  return `${mode} (tools.approval).`;
}

/** A double-quoted YAML scalar (JSON strings are valid YAML). */
const q = (value: string) => JSON.stringify(value);

export function renderConfig(input: {
  baseUrl: string;
  name: string;
  apiKey: string | undefined;
  token: string | undefined;
  apiRoot: string;
  whatsapp?: WhatsappAnswers;
  matrix?: MatrixAnswers;
  email?: EmailAnswers;
}): string {
  const lines = [
    "# Keel configuration, written by `keel setup`. Environment variables override these values",
    "# (OPENAI_BASE_URL, OPENAI_API_KEY, KEEL_MODEL, TELEGRAM_BOT_TOKEN, ...); a value may also",
    '# reference one as "${NAME}". Check it with `keel doctor`. All settings: README.md.',
    "",
    "model:",
    "  # Any OpenAI-compatible server: vLLM, llama.cpp, Ollama, OpenRouter, ...",
    `  base_url: ${q(input.baseUrl)}`,
    `  name: ${q(input.name)}`,
    input.apiKey ? `  api_key: ${q(input.apiKey)}` : '  # api_key: "${OPENAI_API_KEY}"',
    "",
    "agent:",
    "  # Seconds running turns may finish during a stop or restart (then they resume after it).",
    "  restart_drain_timeout: 0",
    "",
    "http:",
    "  # The web chat, dashboard and API listen here; keep it on loopback unless you know why not.",
    '  host: "127.0.0.1"',
    "  port: 8642",
  ];
  if (input.token || input.whatsapp || input.matrix || input.email) {
    lines.push("", "platforms:");
  }
  if (input.token) {
    lines.push(
      "  telegram:",
      `    token: ${q(input.token)}`,
      ...(input.apiRoot !== DEFAULT_TELEGRAM_ROOT ? [`    api_root: ${q(input.apiRoot)}`] : []),
      "    # Telegram user ids that may talk to the bot; others get a pairing code",
      "    # (`keel pairing approve CODE`).",
      "    allowed_users: []",
    );
  }
  const wa = input.whatsapp;
  if (wa) {
    lines.push(
      "  whatsapp:",
      `    phone_number_id: ${q(wa.phoneNumberId)}`,
      `    access_token: ${q(wa.accessToken)}`,
      `    app_secret: ${q(wa.appSecret)}`,
      "    # The webhook's GET handshake must echo this: enter it in the Meta app's webhook settings.",
      `    verify_token: ${q(wa.verifyToken)}`,
      ...(wa.apiRoot !== DEFAULT_GRAPH_ROOT ? [`    api_root: ${q(wa.apiRoot)}`] : []),
      "    # WhatsApp ids (phone digits) that may talk; others get a pairing code.",
      "    allowed_users: []",
    );
  }
  const mx = input.matrix;
  if (mx) {
    lines.push(
      "  matrix:",
      `    homeserver: ${q(mx.homeserver)}`,
      `    user_id: ${q(mx.userId)}`,
      `    access_token: ${q(mx.accessToken)}`,
      "    # Matrix ids that may talk and invite the bot; others get a pairing code. No encrypted rooms.",
      "    allowed_users: []",
    );
  }
  if (input.email) lines.push(...renderEmail(input.email));
  return `${lines.join("\n")}\n`;
}

/** The WhatsApp questions: skipped on an empty number id; the token is tested before it is kept. */
async function askWhatsapp(
  ask: ReturnType<typeof prompter>,
  io: CliIo,
): Promise<WhatsappAnswers | null | "failed"> {
  const phoneNumberId = await ask.text("WhatsApp Cloud API phone number id (empty to skip)", "");
  if (!phoneNumberId) return null;
  const accessToken = await ask.text("WhatsApp access token (a system user's)", "");
  const appSecret = await ask.text("Meta app secret (App settings > Basic)", "");
  const verifyToken = await ask.text(
    "Webhook verify token (any string you choose)",
    randomBytes(16).toString("hex"),
  );
  if (!accessToken || !appSecret) {
    io.err("✗ WhatsApp needs the access token and the app secret as well.");
    return "failed";
  }
  const apiRoot = io.env.WHATSAPP_API_ROOT || DEFAULT_GRAPH_ROOT;
  const probe = await probeWhatsapp(apiRoot, phoneNumberId, accessToken);
  if (!probe.ok) {
    io.err(`✗ ${probe.detail}`);
    return "failed";
  }
  io.out(`✓ WhatsApp: ${probe.detail}`);
  io.out(
    "  Meta delivers messages to https://<public name>/platforms/whatsapp/webhook: put Keel behind",
  );
  io.out(
    "  an HTTPS reverse proxy, list that name in http.public_hosts, and enter the URL and the",
  );
  io.out(
    `  verify token ${verifyToken} in the app's WhatsApp > Configuration page (docs/operations.md).`,
  );
  return { phoneNumberId, accessToken, appSecret, verifyToken, apiRoot };
}

/** What setup writes for Matrix (platforms.matrix). */
interface MatrixAnswers {
  homeserver: string;
  userId: string;
  accessToken: string;
}

/** The Matrix questions: skipped on an empty homeserver; the token is tested with whoami. */
async function askMatrix(
  ask: ReturnType<typeof prompter>,
  io: CliIo,
): Promise<MatrixAnswers | null | "failed"> {
  const homeserver = await ask.text("Matrix homeserver URL for a bot account (empty to skip)", "");
  if (!homeserver) return null;
  const userId = await ask.text("The bot's Matrix user id (@keel:example.org)", "");
  const accessToken = await ask.text("The bot's access token", "");
  if (!userId || !accessToken) {
    io.err("✗ Matrix needs the bot's user id and access token as well.");
    return "failed";
  }
  const probe = await probeMatrix(homeserver, userId, accessToken);
  if (!probe.ok) {
    io.err(`✗ ${probe.detail}`);
    return "failed";
  }
  io.out(`✓ Matrix: ${probe.detail}`);
  io.out(
    "  Invite it to an unencrypted room (encrypted rooms are not supported yet); it joins when",
  );
  io.out("  the inviter is listed under platforms.matrix.allowed_users, or pairs.");
  return { homeserver, userId, accessToken };
}

/** Plain line prompts on stdin; with `--yes` (or at the end of input) every answer is the default. */
function prompter(io: CliIo, assumeDefaults: boolean) {
  // A terminal echoes the Enter key; piped input does not, so end the prompt line ourselves.
  const echoes = (io.stdin as { isTTY?: boolean }).isTTY === true;
  const endLine = () => {
    if (!assumeDefaults && !echoes) io.write("\n");
  };
  let rl: ReturnType<typeof createInterface> | null = null;
  let lines: AsyncIterator<string> | null = null;
  const next = async (): Promise<string | null> => {
    if (assumeDefaults) return null;
    if (!lines) {
      rl = createInterface({ input: io.stdin, terminal: false });
      lines = rl[Symbol.asyncIterator]();
    }
    const line = await lines.next();
    return line.done ? null : line.value.trim();
  };
  return {
    async text(question: string, fallback: string): Promise<string> {
      if (!assumeDefaults) io.write(`${question}${fallback ? ` [${fallback}]` : ""}: `);
      const answer = await next();
      endLine();
      return answer || fallback;
    },
    async yesNo(question: string, fallback: boolean): Promise<boolean> {
      if (!assumeDefaults) io.write(`${question} ${fallback ? "[Y/n]" : "[y/N]"}: `);
      const answer = (await next())?.toLowerCase();
      endLine();
      if (!answer) return fallback;
      return answer.startsWith("y");
    },
    close(): void {
      (rl as ReturnType<typeof createInterface> | null)?.close();
    },
  };
}
