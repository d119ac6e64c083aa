/**
 * Who may talk to a chat bot: users in the platform's `allowed_users` or `admin_users`, and users
 * an operator approved through pairing (`keel pairing approve CODE`). The store enforces code
 * length, expiry and the cap. Only `admin_users` have operator rights (`/restart`, `/sethome`).
 * Identities are platform user ids, never display names.
 */
import type { PairingStore } from "../sessions/store.js";

/** The slice of the store a chat adapter needs for pairing. */
export type PairingAccess = Pick<PairingStore, "requestPairing" | "isUserApproved">;

/** Pairing codes live an hour; at most three wait for approval at once. */
export const PAIRING_TTL_MS = 3_600_000;
export const PAIRING_MAX_PENDING = 3;

/** What a user hears once the operator approved their pairing code (queued with the approval). */
export const PAIRING_APPROVED_NOTICE =
  "✅ You're in: the operator approved your access. Send your message again and I'll answer.";

/** Decides access for one platform's users and words the answer a stranger gets. */
export class ChatAccess {
  private readonly allowed: Set<string>;
  private readonly admins: Set<string>;

  constructor(
    private readonly platform: string,
    allowedUsers: string[],
    private readonly pairing: PairingAccess,
    adminUsers: string[] = [],
  ) {
    this.admins = new Set(adminUsers.map(String));
    this.allowed = new Set([...allowedUsers.map(String), ...this.admins]);
  }

  /** True for the users in `admin_users`. */
  isOperator(userId: string): boolean {
    return this.admins.has(userId);
  }

  /** True for configured users and users approved through pairing. */
  async isAllowed(userId: string): Promise<boolean> {
    if (this.allowed.has(userId)) return true;
    return this.pairing.isUserApproved(this.platform, userId);
  }

  /**
   * Asks the store for a pairing code for a stranger in a private chat and returns the text to
   * send them. Asking again while a code is live returns the same code.
   */
  async pairingAnswer(input: {
    userId: string;
    userName: string | null;
    chatId: string;
  }): Promise<string> {
    const request = await this.pairing.requestPairing({
      platform: this.platform,
      userId: input.userId,
      userName: input.userName,
      chatId: input.chatId,
      ttlMs: PAIRING_TTL_MS,
      maxPending: PAIRING_MAX_PENDING,
    });
    if (!request) {
      return "I can't take new pairing requests right now: too many pending requests are waiting for the operator. Please try again later.";
    }
    return [
      "Hi! I don't know you yet.",
      `Your pairing code is ${request.code} (valid for one hour).`,
      `To get access, ask the operator to run \`keel pairing approve ${request.code}\`, then send your message again.`,
    ].join("\n");
  }
}
