/**
 * How the control commands look at a gateway from the outside: its address, `/readyz`, the
 * control API, its pid file, the tail of its output log, and bounded polling.
 */
import { closeSync, openSync, readSync, statSync } from "node:fs";
import { createServer } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import type { GatewayStatus } from "../control/control-surface.js";
import { isGatewayAlive, type PidRecord, readPidFile } from "../lifecycle/pid-file.js";

/** What reaching the control API takes (a subset of `Config`). */
export interface ControlTarget {
  http: { host: string; port: number };
  controlToken: string;
}

/** One HTTP probe never waits longer than this: a hung gateway must not hang the CLI. */
const PROBE_TIMEOUT_MS = 2000;

/** The address a local client uses to reach the configured listener (wildcards become loopback). */
export function gatewayBaseUrl(http: { host: string; port: number }): string {
  const host = http.host === "0.0.0.0" ? "127.0.0.1" : http.host === "::" ? "::1" : http.host;
  const shown = host.includes(":") ? `[${host}]` : host;
  return `http://${shown}:${http.port}`;
}

/**
 * The browser login link: opening it sets the web session cookie (docs/security.md). It carries
 * the control token, so it is shown to the operator and never logged.
 */
export function loginLink(http: { host: string; port: number }, controlToken: string): string {
  return `${gatewayBaseUrl(http)}/?token=${encodeURIComponent(controlToken)}`;
}

/** `GET /readyz`: true on 200, false on any other answer, null when nothing answers. */
export async function probeReady(baseUrl: string): Promise<boolean | null> {
  try {
    const res = await fetch(`${baseUrl}/readyz`, { signal: AbortSignal.timeout(PROBE_TIMEOUT_MS) });
    await res.body?.cancel();
    return res.status === 200;
  } catch {
    return null;
  }
}

/** An answer of the control API; `status` 0 never occurs (no answer is null). */
export interface ControlAnswer {
  status: number;
  body: unknown;
}

/**
 * Calls the control API with the control token. Null when the gateway does not answer (not
 * listening, timed out); any HTTP answer, including 401, comes back as is.
 */
export async function callControlApi(
  config: ControlTarget,
  path: string,
  init: { method?: "GET" | "POST"; body?: unknown } = {},
): Promise<ControlAnswer | null> {
  const headers: Record<string, string> = { authorization: `Bearer ${config.controlToken}` };
  if (init.body !== undefined) headers["content-type"] = "application/json";
  try {
    const res = await fetch(`${gatewayBaseUrl(config.http)}${path}`, {
      method: init.method ?? "GET",
      headers,
      ...(init.body !== undefined && { body: JSON.stringify(init.body) }),
      signal: AbortSignal.timeout(PROBE_TIMEOUT_MS),
    });
    const text = await res.text();
    let body: unknown = text;
    try {
      body = JSON.parse(text) as unknown;
    } catch {
      // Not JSON: keep the text for the message.
    }
    return { status: res.status, body };
  } catch {
    return null;
  }
}

/**
 * `GET /api/status` of the gateway at the configured address, only if it is the gateway of this
 * home folder (its pid is the one in `gateway.pid`); another home's gateway on the same port
 * must not answer for this one.
 */
export async function fetchOwnApiStatus(
  config: ControlTarget,
  record: PidRecord | null,
): Promise<GatewayStatus | null> {
  return record === null ? null : ownStatusOf(record, await callControlApi(config, "/api/status"));
}

/** The status in `answer` if it is the answer of the gateway `record` names, else null. */
function ownStatusOf(record: PidRecord, answer: ControlAnswer | null): GatewayStatus | null {
  if (answer === null || answer.status !== 200) return null;
  const body = answer.body as Partial<GatewayStatus> | null;
  if (body === null || typeof body !== "object" || body.pid !== record.pid) return null;
  return body as GatewayStatus;
}

/** The running gateway of `home` (pid file naming a live Keel process), or null. */
export async function liveGateway(home: string): Promise<PidRecord | null> {
  const record = await readPidFile(home);
  if (record === null) return null;
  return (await isGatewayAlive(record)) ? record : null;
}

/**
 * This home's gateway as a command finds it: through `gateway.pid` (a live process with the
 * recorded pid and start time), confirmed at the configured address (the control API there
 * reports that pid). A port alone proves nothing: another home's gateway, or another program,
 * may listen on it.
 */
export type OwnGateway =
  | { state: "not_running" }
  | { state: "running"; record: PidRecord; status: GatewayStatus }
  /**
   * The pid file names a live gateway, but the address does not answer as it: nothing answers
   * (still starting, or stopping), or something else does (`answered`: its HTTP status, or the
   * pid it reported).
   */
  | { state: "unconfirmed"; record: PidRecord; answered: string | null };

export async function findOwnGateway(
  config: ControlTarget & { home: string },
): Promise<OwnGateway> {
  const record = await liveGateway(config.home);
  if (record === null) return { state: "not_running" };
  const answer = await callControlApi(config, "/api/status");
  const status = ownStatusOf(record, answer);
  if (status !== null) return { state: "running", record, status };
  return { state: "unconfirmed", record, answered: describeAnswer(answer) };
}

function describeAnswer(answer: ControlAnswer | null): string | null {
  if (answer === null) return null;
  const pid = (answer.body as { pid?: unknown } | null)?.pid;
  if (answer.status === 200 && typeof pid === "number") return `a gateway with pid ${pid}`;
  return `HTTP ${answer.status}`;
}

/** One line saying why an unconfirmed gateway cannot be used, for a command's error. */
export function unconfirmedText(
  gateway: Extract<OwnGateway, { state: "unconfirmed" }>,
  http: { host: string; port: number },
): string {
  const url = gatewayBaseUrl(http);
  const mine = `this home's gateway (pid ${gateway.record.pid})`;
  if (gateway.answered === null) return `${mine} does not answer at ${url} (starting or stopping?)`;
  if (gateway.answered === "HTTP 401") {
    return `${mine} could not be confirmed at ${url}: the control token was refused there (another home's gateway on the same port, or this one started with a different control token)`;
  }
  return `${mine} is not the one answering at ${url} (${gateway.answered} answers there: another home's gateway or another program on the same port)`;
}

/**
 * Calls `check` every `intervalMs` until it returns a value other than null or `timeoutMs` has
 * passed (then null). A check is always made at least once.
 */
export async function pollUntil<T>(
  check: () => Promise<T | null>,
  options: { timeoutMs: number; intervalMs?: number },
): Promise<T | null> {
  const deadline = Date.now() + options.timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== null) return value;
    if (Date.now() >= deadline) return null;
    await sleep(options.intervalMs ?? 200);
  }
}

/** Size of a file in bytes, 0 when it does not exist. */
export function fileSize(path: string): number {
  try {
    return statSync(path).size;
  } catch {
    return 0;
  }
}

/** The last `lines` lines written to `path` since byte `from` (at most 64 KiB read). */
export function readLogTail(path: string, from: number, lines: number): string[] {
  const size = fileSize(path);
  const start = Math.max(from, size - 65_536);
  if (size <= start) return [];
  const buffer = Buffer.alloc(size - start);
  let fd: number | null = null;
  try {
    fd = openSync(path, "r");
    readSync(fd, buffer, 0, buffer.length, start);
  } catch {
    return [];
  } finally {
    if (fd !== null) closeSync(fd);
  }
  return buffer
    .toString("utf8")
    .split("\n")
    .filter((line) => line.trim().length > 0)
    .slice(-lines);
}

/**
 * Parses a `--timeout <seconds>` value; the default when absent, null when it is not a positive
 * number.
 */
export function parseTimeoutSeconds(value: string | undefined, fallback: number): number | null {
  if (value === undefined) return fallback;
  const seconds = Number(value);
  return Number.isFinite(seconds) && seconds > 0 ? seconds : null;
}

/** The listen error's code when the address cannot be bound (EADDRINUSE, EACCES), else null. */
export function portInUse(host: string, port: number): Promise<string | null> {
  return new Promise((done) => {
    const server = createServer();
    server.once("error", (err: NodeJS.ErrnoException) => done(err.code ?? err.message));
    server.listen({ host, port, exclusive: true }, () => server.close(() => done(null)));
  });
}
