/** Who may talk to the Telegram bot: the shared chat access rules, on platform `telegram`. */
import { ChatAccess, type PairingAccess } from "../chat-access.js";

export {
  PAIRING_APPROVED_NOTICE,
  PAIRING_MAX_PENDING,
  PAIRING_TTL_MS,
  type PairingAccess,
} from "../chat-access.js";

/** Decides access for Telegram users and words the answer a stranger gets. */
export class TelegramAccess extends ChatAccess {
  constructor(allowedUsers: string[], pairing: PairingAccess, adminUsers: string[] = []) {
    super("telegram", allowedUsers, pairing, adminUsers);
  }
}
