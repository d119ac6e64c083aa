/** Commands that read or copy the store directly: sessions, pairing, backup. */
import { existsSync } from "node:fs";
import { join, resolve } from "node:path";
import { SqliteStore } from "../sessions/sqlite-store.js";
import { type CliIo, EXIT } from "./io.js";
import { type GlobalOptions, loadForCommand } from "./load.js";

async function withStore(
  options: GlobalOptions,
  io: CliIo,
  fn: (store: SqliteStore) => Promise<number>,
): Promise<number> {
  const loaded = loadForCommand(options, io);
  if (!loaded.ok) return loaded.code;
  const store = new SqliteStore(join(loaded.loaded.config.home, "state.db"));
  try {
    return await fn(store);
  } finally {
    await store.close();
  }
}

export function sessionsList(
  options: GlobalOptions & { limit?: string; json?: boolean },
  io: CliIo,
): Promise<number> {
  return withStore(options, io, async (store) => {
    const sessions = await store.listSessions({ limit: Number(options.limit ?? 50) || 50 });
    if (options.json) {
      io.out(JSON.stringify(sessions, null, 2));
      return EXIT.ok;
    }
    if (sessions.length === 0) io.out("No sessions yet.");
    for (const s of sessions) {
      const flags = [s.resumePending && "resume-pending", s.suspended && "suspended"]
        .filter(Boolean)
        .join(",");
      io.out(
        `${s.sessionId}  ${new Date(s.updatedAt).toISOString()}  ${String(s.messageCount).padStart(4)} msgs  ${s.key}${flags ? `  [${flags}]` : ""}`,
      );
    }
    return EXIT.ok;
  });
}

export function sessionsShow(
  id: string,
  options: GlobalOptions & { json?: boolean },
  io: CliIo,
): Promise<number> {
  return withStore(options, io, async (store) => {
    const session = await store.getSessionById(id);
    if (!session) {
      io.err(`No session with id ${id}. See \`keel sessions list\`.`);
      return EXIT.failure;
    }
    const transcript = await store.loadTranscript(id);
    if (options.json) {
      io.out(JSON.stringify({ session, messages: transcript }, null, 2));
      return EXIT.ok;
    }
    io.out(`Session ${id} (${session.key})`);
    for (const { message } of transcript) {
      if (message.role === "assistant" && message.tool_calls?.length) {
        for (const call of message.tool_calls)
          io.out(`  [tool] ${call.function.name} ${call.function.arguments}`);
        if (message.content) io.out(`assistant: ${message.content}`);
      } else if (message.role === "tool") {
        io.out(`  [result] ${message.content.slice(0, 200)}`);
      } else {
        io.out(`${message.role}: ${message.content}`);
      }
    }
    return EXIT.ok;
  });
}

export function pairingList(options: GlobalOptions, io: CliIo): Promise<number> {
  return withStore(options, io, async (store) => {
    const requests = await store.listPairingRequests();
    if (requests.length === 0) io.out("No pending pairing requests.");
    for (const r of requests) {
      const minutes = Math.max(0, Math.round((r.expiresAt - Date.now()) / 60_000));
      io.out(
        `${r.code}  ${r.platform}  user ${r.userId}${r.userName ? ` (${r.userName})` : ""}  expires in ${minutes} min`,
      );
    }
    return EXIT.ok;
  });
}

export function pairingApprove(code: string, options: GlobalOptions, io: CliIo): Promise<number> {
  return withStore(options, io, async (store) => {
    const approved = await store.approvePairing(code);
    if (!approved) {
      io.err(
        `No pending pairing request with code ${code} (it may have expired). See \`keel pairing list\`.`,
      );
      return EXIT.failure;
    }
    io.out(
      `Approved ${approved.platform} user ${approved.userId}${approved.userName ? ` (${approved.userName})` : ""}.`,
    );
    return EXIT.ok;
  });
}

export function backup(path: string, options: GlobalOptions, io: CliIo): Promise<number> {
  const target = resolve(path);
  if (existsSync(target)) {
    io.err(`${target} already exists; choose a new path.`);
    return Promise.resolve(EXIT.failure);
  }
  return withStore(options, io, async (store) => {
    await store.backup(target);
    io.out(`Backed up state.db to ${target}.`);
    return EXIT.ok;
  });
}
