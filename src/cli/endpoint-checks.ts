/**
 * Probes of the endpoints a user configures, shared by `keel doctor` and `keel setup`: the model
 * server (`GET /models`, optionally one chat request), the Telegram Bot API (`getMe`) and the
 * Slack Web API (`auth.test`, `apps.connections.open`) and the WhatsApp Graph API (the phone
 * number's record). Each answer names the URL it tried,
 * without the token.
 */
import { errorMessage } from "../lib/errors.js";
import { GRAPH_VERSION } from "../platforms/whatsapp/graph.js";

const TIMEOUT_MS = 8000;

export type ProbeResult =
  | { ok: true; detail: string; models?: string[] }
  | { ok: false; detail: string; warnOnly?: boolean };

/** Node's fetch hides the reason in `cause` ("fetch failed" / ECONNREFUSED). */
function reason(err: unknown): string {
  const cause = (err as { cause?: { code?: string; message?: string } }).cause;
  return cause?.code ?? cause?.message ?? errorMessage(err);
}

const root = (baseUrl: string) => baseUrl.replace(/\/+$/, "");

export async function probeModels(
  baseUrl: string,
  apiKey: string | undefined,
  name?: string,
): Promise<ProbeResult> {
  const url = `${root(baseUrl)}/models`;
  let res: Response;
  try {
    res = await fetch(url, {
      headers: apiKey ? { authorization: `Bearer ${apiKey}` } : {},
      signal: AbortSignal.timeout(TIMEOUT_MS),
    });
  } catch (err) {
    return { ok: false, detail: `${url} is unreachable (${reason(err)})` };
  }
  if (res.status === 401 || res.status === 403) {
    await res.body?.cancel();
    return {
      ok: false,
      detail: `${url} rejected the API key (HTTP ${res.status}): check model.api_key`,
    };
  }
  if (!res.ok) {
    await res.body?.cancel();
    return {
      ok: false,
      detail: `${url} answered HTTP ${res.status}: model.base_url should be the API root that serves /models and /chat/completions (often ending in /v1)`,
    };
  }
  let models: string[] = [];
  try {
    const body = (await res.json()) as { data?: { id?: unknown }[] };
    models = (body.data ?? []).map((m) => String(m.id)).filter((id) => id !== "undefined");
  } catch {
    return { ok: false, detail: `${url} did not answer with OpenAI's model list (not JSON)` };
  }
  if (name && models.length > 0 && !models.includes(name)) {
    return {
      ok: false,
      warnOnly: true,
      detail: `${root(baseUrl)} answers, but does not list model ${name} (it lists ${models.slice(0, 5).join(", ")}${models.length > 5 ? ", ..." : ""})`,
    };
  }
  return { ok: true, detail: `${root(baseUrl)} answers${name ? `; model ${name}` : ""}`, models };
}

/** One short chat request, as the agent would make it. */
export async function probeCompletion(
  baseUrl: string,
  apiKey: string | undefined,
  name: string,
): Promise<ProbeResult> {
  const url = `${root(baseUrl)}/chat/completions`;
  try {
    const res = await fetch(url, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        ...(apiKey ? { authorization: `Bearer ${apiKey}` } : {}),
      },
      body: JSON.stringify({
        model: name,
        max_tokens: 16,
        messages: [{ role: "user", content: "Reply with the word: ready" }],
      }),
      signal: AbortSignal.timeout(60_000),
    });
    const text = await res.text();
    if (!res.ok)
      return { ok: false, detail: `${url} answered HTTP ${res.status}: ${text.slice(0, 200)}` };
    const body = JSON.parse(text) as { choices?: { message?: { content?: unknown } }[] };
    if (!Array.isArray(body.choices))
      return { ok: false, detail: `${url} did not answer with a chat completion` };
    return { ok: true, detail: `${name} answered a test request` };
  } catch (err) {
    return { ok: false, detail: `${url} failed (${reason(err)})` };
  }
}

/** `getMe` on the configured Bot API server; the token never appears in the result. */
export async function probeTelegram(apiRoot: string, token: string): Promise<ProbeResult> {
  const shown = `${root(apiRoot)}/bot<token>/getMe`;
  try {
    const res = await fetch(`${root(apiRoot)}/bot${token}/getMe`, {
      signal: AbortSignal.timeout(TIMEOUT_MS),
    });
    const body = (await res.json().catch(() => ({}))) as {
      ok?: boolean;
      result?: { username?: string };
      description?: string;
    };
    if (!body.ok) {
      return {
        ok: false,
        detail: `${shown} rejected the token (${body.description ?? `HTTP ${res.status}`}): check platforms.telegram.token (TELEGRAM_BOT_TOKEN)`,
      };
    }
    return { ok: true, detail: `bot @${body.result?.username ?? "?"}` };
  } catch (err) {
    return { ok: false, detail: `${shown} is unreachable (${reason(err)})` };
  }
}

/**
 * `GET /v10/users/@me` and `GET /v10/gateway/bot` on the configured Discord REST base: the bot's
 * name and the identifies Discord still allows today. The token never appears in the result.
 */
export async function probeDiscord(apiRoot: string, token: string): Promise<ProbeResult> {
  const base = `${root(apiRoot)}/v10`;
  const get = (path: string) =>
    fetch(`${base}${path}`, {
      headers: { authorization: `Bot ${token}` },
      signal: AbortSignal.timeout(TIMEOUT_MS),
    });
  try {
    const me = await get("/users/@me");
    if (!me.ok) {
      return {
        ok: false,
        detail: `${base}/users/@me rejected the token (HTTP ${me.status}): check platforms.discord.token (DISCORD_BOT_TOKEN)`,
      };
    }
    const user = (await me.json().catch(() => ({}))) as { username?: string };
    const gateway = await get("/gateway/bot");
    const info = (await gateway.json().catch(() => ({}))) as {
      session_start_limit?: { remaining?: number; total?: number };
    };
    const limit = info.session_start_limit;
    const starts =
      limit?.remaining !== undefined
        ? `, ${limit.remaining}/${limit.total ?? "?"} identifies left today`
        : "";
    return { ok: true, detail: `bot ${user.username ?? "?"}${starts}` };
  } catch (err) {
    return { ok: false, detail: `${base} is unreachable (${reason(err)})` };
  }
}
/** One Slack Web API call with a token; the parsed answer, or why there is none. */
async function slackCall(
  apiRoot: string,
  method: string,
  token: string,
): Promise<{ ok: true; body: Record<string, unknown> } | { ok: false; detail: string }> {
  const url = `${root(apiRoot)}/${method}`;
  try {
    const res = await fetch(url, {
      method: "POST",
      headers: { authorization: `Bearer ${token}` },
      signal: AbortSignal.timeout(TIMEOUT_MS),
    });
    const body = (await res.json().catch(() => ({}))) as Record<string, unknown>;
    if (body.ok === true) return { ok: true, body };
    return {
      ok: false,
      detail: `${url} answered ${typeof body.error === "string" ? body.error : `HTTP ${res.status}`}`,
    };
  } catch (err) {
    return { ok: false, detail: `${url} is unreachable (${reason(err)})` };
  }
}

/**
 * The bot token with `auth.test`, the app token with `apps.connections.open` (it only hands out a
 * socket URL, which expires unused); the tokens never appear in the result.
 */
export async function probeSlack(
  apiRoot: string,
  appToken: string,
  botToken: string,
): Promise<ProbeResult> {
  const auth = await slackCall(apiRoot, "auth.test", botToken);
  if (!auth.ok) {
    return {
      ok: false,
      detail: `${auth.detail}: check platforms.slack.bot_token (SLACK_BOT_TOKEN)`,
    };
  }
  const socket = await slackCall(apiRoot, "apps.connections.open", appToken);
  if (!socket.ok) {
    return {
      ok: false,
      detail: `${socket.detail}: check platforms.slack.app_token (SLACK_APP_TOKEN, scope connections:write) and that Socket Mode is on`,
    };
  }
  return {
    ok: true,
    detail: `bot @${String(auth.body.user ?? "?")} on ${String(auth.body.team ?? "?")}, Socket Mode ready`,
  };
}

/**
 * The cheapest call that proves a WhatsApp access token and phone number id together: `GET
 * /{phone_number_id}` on the Graph API (its display number and verified name). Never the token.
 */
export async function probeWhatsapp(
  apiRoot: string,
  phoneNumberId: string,
  token: string,
): Promise<ProbeResult> {
  const url = `${root(apiRoot)}/${GRAPH_VERSION}/${phoneNumberId}`;
  try {
    const res = await fetch(`${url}?fields=display_phone_number,verified_name`, {
      headers: { authorization: `Bearer ${token}` },
      signal: AbortSignal.timeout(TIMEOUT_MS),
    });
    const body = (await res.json().catch(() => ({}))) as {
      display_phone_number?: string;
      verified_name?: string;
      error?: { code?: number; message?: string };
    };
    if (!res.ok) {
      const code = body.error?.code !== undefined ? `, code ${body.error.code}` : "";
      return {
        ok: false,
        detail: `${url} refused (HTTP ${res.status}${code}): check platforms.whatsapp.access_token (WHATSAPP_ACCESS_TOKEN) and phone_number_id (WHATSAPP_PHONE_NUMBER_ID)`,
      };
    }
    const name = body.verified_name ? ` (${body.verified_name})` : "";
    return { ok: true, detail: `number ${body.display_phone_number ?? "?"}${name}` };
  } catch (err) {
    return { ok: false, detail: `${url} is unreachable (${reason(err)})` };
  }
}

/** `GET /account/whoami` on the homeserver: the token works, and is the configured account's. */
export async function probeMatrix(
  homeserver: string,
  userId: string,
  token: string,
): Promise<ProbeResult> {
  const url = `${root(homeserver)}/_matrix/client/v3/account/whoami`;
  try {
    const res = await fetch(url, {
      headers: { authorization: `Bearer ${token}` },
      signal: AbortSignal.timeout(TIMEOUT_MS),
    });
    const body = (await res.json().catch(() => ({}))) as { user_id?: string; errcode?: string };
    if (!res.ok) {
      return {
        ok: false,
        detail: `${url} refused (HTTP ${res.status}${body.errcode ? ` ${body.errcode}` : ""}): check platforms.matrix.access_token (MATRIX_ACCESS_TOKEN)`,
      };
    }
    if (body.user_id !== userId) {
      return {
        ok: false,
        detail: `the token belongs to ${body.user_id ?? "?"}, not platforms.matrix.user_id ${userId} (MATRIX_USER_ID)`,
      };
    }
    return { ok: true, detail: `bot ${userId}` };
  } catch (err) {
    return { ok: false, detail: `${url} is unreachable (${reason(err)})` };
  }
}
