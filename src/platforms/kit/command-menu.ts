/**
 * Keel's chat commands as a platform's command menu lists them (Telegram's setMyCommands,
 * Discord's slash commands). What each command does is the runner's (runner/chat-commands.ts);
 * this is only the menu, in the order people see it.
 */

export interface MenuCommand {
  name: string;
  description: string;
}

export interface MenuOptions {
  /** What the platform calls a conversation: "Make this chat the home channel". */
  place: "chat" | "channel";
  /** `/approve` and `/deny` are listed too. */
  approvals: boolean;
}

export function commandMenu({ place, approvals }: MenuOptions): MenuCommand[] {
  return [
    { name: "new", description: "Start a fresh conversation" },
    { name: "stop", description: "Stop the running answer" },
    { name: "retry", description: "Answer the last message again" },
    { name: "restart", description: "Restart the gateway" },
    { name: "status", description: "Show gateway and session status" },
    { name: "help", description: "List commands" },
    { name: "sethome", description: `Make this ${place} the home channel` },
    ...(approvals
      ? [
          { name: "approve", description: "Approve the command waiting here" },
          { name: "deny", description: "Deny the command waiting here" },
        ]
      : []),
  ];
}
