/** Commands that read the store directly: sessions, pairing (backups: data-commands.ts). */
import type { Config } from "../config/schema.js";
import { storeTarget } from "../config/store-target.js";
import { isoTime } from "../lib/wire-time.js";
import { PAIRING_APPROVED_NOTICE } from "../platforms/telegram/access.js";
import { openCommandStore } from "../sessions/open-store.js";
import type {
  PairingRequest,
  PairingStore,
  ReportingStore,
  SessionStore,
  Store,
  TurnStore,
} from "../sessions/store.js";
import { type CliIo, EXIT } from "./io.js";
import { type GlobalOptions, loadForCommand } from "./load.js";

/**
 * Opens the store the config selects (the gateway's own choice: Postgres for a postgres://
 * store.url, else this home's state.db) for one command, and closes it afterwards.
 */
export function withStore(
  options: GlobalOptions,
  io: CliIo,
  fn: (store: Store) => Promise<number>,
): Promise<number> {
  return withOpenedStore(options, io, (config) => openCommandStore(storeTarget(config)), fn);
}

/** Opens a store with `open` for one command and closes it afterwards. */
export async function withOpenedStore<S extends { close(): Promise<void> }>(
  options: GlobalOptions,
  io: CliIo,
  open: (config: Config) => S | Promise<S>,
  fn: (store: S) => Promise<number>,
): Promise<number> {
  const loaded = loadForCommand(options, io);
  if (!loaded.ok) return loaded.code;
  const store = await open(loaded.loaded.config);
  try {
    return await fn(store);
  } finally {
    await store.close();
  }
}

export async function sessionsList(
  options: GlobalOptions & { limit?: string; json?: boolean; all?: boolean },
  io: CliIo,
): Promise<number> {
  const limit = Number(options.limit ?? 50);
  if (!Number.isInteger(limit) || limit <= 0) {
    io.err(`keel: --limit must be a positive whole number, got '${options.limit}'`);
    return EXIT.usage;
  }
  return withStore(options, io, async (store: ReportingStore) => {
    const sessions = await store.listSessions({
      limit,
      // Notice lanes (`system:...`) are Keel's bookkeeping, not conversations.
      internal: options.all === true,
    });
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
        `${s.sessionId}  ${isoTime(s.updatedAt)}  ${String(s.messageCount).padStart(4)} msgs  ${s.key}${flags ? `  [${flags}]` : ""}`,
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
  return withStore(options, io, async (store: SessionStore & TurnStore) => {
    const session = await store.getSessionById(id);
    if (!session) {
      io.err(`No session with id ${id}. See \`keel sessions list\`.`);
      return EXIT.failure;
    }
    const transcript = await store.loadTranscript(id);
    const compaction = await store.latestCompaction(id);
    if (options.json) {
      io.out(JSON.stringify({ session, messages: transcript, compaction }, null, 2));
      return EXIT.ok;
    }
    io.out(`Session ${id} (${session.key})`);
    let marked = false;
    for (const { message, seq } of transcript) {
      if (compaction && !marked && seq > compaction.throughSeq) {
        // The model sees the messages above as this summary; they all stay here.
        io.out(
          `--- the model sees the messages above as this summary ---\n${compaction.summary}\n---`,
        );
        marked = true;
      }
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

/** A pairing request or approved user as `pairing list --json` prints it. */
function pairingJson(r: PairingRequest) {
  return {
    code: r.code,
    platform: r.platform,
    user_id: r.userId,
    user_name: r.userName,
    chat_id: r.chatId,
    created_at: isoTime(r.createdAt),
    expires_at: isoTime(r.expiresAt),
    approved_at: isoTime(r.approvedAt),
  };
}

export function pairingList(
  options: GlobalOptions & { approved?: boolean; json?: boolean },
  io: CliIo,
): Promise<number> {
  return withStore(options, io, async (store: PairingStore) => {
    if (options.json) {
      const rows = options.approved
        ? await store.listApprovedUsers()
        : await store.listPairingRequests();
      io.out(JSON.stringify(rows.map(pairingJson), null, 2));
      return EXIT.ok;
    }
    if (options.approved) {
      const users = await store.listApprovedUsers();
      if (users.length === 0) io.out("Nobody has been approved through pairing.");
      for (const u of users) {
        io.out(
          `${u.platform}  user ${u.userId}${u.userName ? ` (${u.userName})` : ""}  approved ${new Date(u.approvedAt ?? 0).toISOString()}`,
        );
      }
      return EXIT.ok;
    }
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
  return withStore(options, io, async (store: PairingStore) => {
    // The welcome is queued in the same transaction: a running gateway sends it within seconds,
    // a stopped one at its next start.
    const approved = await store.approvePairing(code, PAIRING_APPROVED_NOTICE);
    if (!approved) {
      io.err(
        `No pending pairing request with code ${code} (it may have expired). See \`keel pairing list\`.`,
      );
      return EXIT.failure;
    }
    io.out(
      `Approved ${approved.platform} user ${approved.userId}${approved.userName ? ` (${approved.userName})` : ""}; they are told they can start.`,
    );
    return EXIT.ok;
  });
}

/** `keel pairing revoke USER`: USER is a user id, or `platform:id` when several platforms pair. */
export function pairingRevoke(user: string, options: GlobalOptions, io: CliIo): Promise<number> {
  return withStore(options, io, async (store: PairingStore) => {
    const [platform, userId] = user.includes(":")
      ? (user.split(/:(.*)/s, 2) as [string, string])
      : ["telegram", user];
    const removed = await store.revokeUser(platform, userId);
    if (removed === 0) {
      io.err(
        `${platform} user ${userId} was not approved through pairing. See \`keel pairing list --approved\`.`,
      );
      return EXIT.failure;
    }
    io.out(`Revoked ${platform} user ${userId}: their next message gets a new pairing code.`);
    return EXIT.ok;
  });
}
