/**
 * Sending to Discord over REST (@discordjs/rest, which waits out 429s itself and retries 5xx and
 * timeouts). Every part of a reply carries a nonce made of its outbox id and part number with
 * `enforce_nonce`, so a resend of a part that Discord already created (a library retry after a
 * lost response, the outbox retrying after a crash) returns the existing message instead of
 * posting it twice (https://discord.com/developers/docs/resources/message#create-message,
 * "the past few minutes").
 */
import { DiscordAPIError, type REST } from "@discordjs/rest";
import { type RESTPostAPIChannelMessageJSONBody, Routes } from "discord-api-types/v10";
import type { Logger } from "pino";
import type { ChatAddress, OutboundReply } from "../../contract/platform.js";
import { splitDiscordMessage } from "./split.js";

/** Discord error codes the sender handles (https://discord.com/developers/docs/topics/opcodes-and-status-codes). */
const THREAD_ALREADY_CREATED = 160004;
const UNKNOWN_MESSAGE = 10008;
const THREAD_NAME_LIMIT = 100;

/** The nonce of one part of an outbox row: at most 25 characters, stable across restarts. */
export function partNonce(outboxId: number, part: number): string {
  return `k${outboxId}.${part}`;
}

/** A thread name from the reply's first line: plain, short, never empty. */
export function threadName(text: string): string {
  const line = text
    .split("\n")
    .map((l) => l.replace(/[`*_~>#|]/g, "").trim())
    .find((l) => l !== "");
  const name = line ?? "Keel";
  return name.length <= THREAD_NAME_LIMIT ? name : `${name.slice(0, THREAD_NAME_LIMIT - 1)}…`;
}

export function describeDiscordError(err: unknown): string {
  if (err instanceof DiscordAPIError) return `${err.status} ${err.code}: ${err.message}`;
  return err instanceof Error ? err.message : String(err);
}

export class DiscordSender {
  /** Threads known to exist (started here or seen), so a reply does not try to start them again. */
  private readonly threads = new Set<string>();

  constructor(
    private readonly rest: REST,
    private readonly logger: Logger,
  ) {}

  noteThread(threadId: string): void {
    if (this.threads.size > 10_000) this.threads.clear();
    this.threads.add(threadId);
  }

  /** Splits and sends a reply; throws when Discord did not accept a part (the outbox retries). */
  async deliver(reply: OutboundReply): Promise<void> {
    const parts = splitDiscordMessage(reply.text);
    for (const [index, content] of parts.entries()) {
      await this.post(reply.address, content, index === 0, partNonce(reply.outboxId, index));
    }
  }

  /**
   * Posts one message where a reply to `address` goes; the first one answers the user's message.
   * With a nonce (enforced), a resend returns the message already created. Returns its id.
   */
  async post(
    address: ChatAddress,
    content: string,
    first: boolean,
    nonce?: string,
    rest: REST = this.rest,
  ): Promise<string> {
    const target = await this.channelFor(address, content);
    const body: RESTPostAPIChannelMessageJSONBody = {
      content,
      ...(nonce !== undefined ? { nonce, enforce_nonce: true } : {}),
      // The model's text must not ping @everyone, roles or users.
      allowed_mentions: { parse: [], replied_user: false },
    };
    const replyTo = address.replyToMessageId;
    if (first && replyTo !== undefined && target === address.chatId) {
      body.message_reference = { message_id: replyTo, fail_if_not_exists: false };
    }
    const message = (await rest.post(Routes.channelMessages(target), { body })) as { id: string };
    return message.id;
  }

  /** Replaces a message's text; false when the message is gone. */
  async edit(
    address: ChatAddress,
    messageId: string,
    content: string,
    rest: REST = this.rest,
  ): Promise<boolean> {
    const target = await this.channelFor(address, content);
    try {
      await rest.patch(Routes.channelMessage(target, messageId), {
        body: { content, allowed_mentions: { parse: [] } },
      });
      return true;
    } catch (err) {
      if (err instanceof DiscordAPIError && err.code === UNKNOWN_MESSAGE) return false;
      throw err;
    }
  }

  /** Deletes a message; one already gone is fine. */
  async remove(address: ChatAddress, messageId: string): Promise<void> {
    const target = await this.channelFor(address, "Keel");
    try {
      await this.rest.delete(Routes.channelMessage(target, messageId));
    } catch (err) {
      if (!(err instanceof DiscordAPIError && err.code === UNKNOWN_MESSAGE)) throw err;
    }
  }

  /** Sends a plain text once, outside the outbox (the pairing answer to a stranger). */
  async sendPlain(channelId: string, content: string): Promise<void> {
    await this.rest.post(Routes.channelMessages(channelId), {
      body: { content, allowed_mentions: { parse: [] } },
    });
  }

  /** Shows "typing" in the channel a reply to `address` will go to (for about 10 s). */
  async typing(address: ChatAddress): Promise<void> {
    const channel =
      address.threadId !== undefined && this.threads.has(address.threadId)
        ? address.threadId
        : address.chatId;
    await this.rest.post(Routes.channelTyping(channel));
  }

  /**
   * The channel a reply goes to. An address with a thread id is a conversation started on a
   * channel message: its thread (which has the message's id) is started here on the first reply;
   * "already created" means an earlier attempt did it. When the thread cannot be started (no
   * permission, not a thread-capable channel) the reply goes to the channel, answering the message.
   */
  private async channelFor(address: ChatAddress, firstPart: string): Promise<string> {
    const threadId = address.threadId;
    if (threadId === undefined || this.threads.has(threadId)) return threadId ?? address.chatId;
    try {
      await this.rest.post(Routes.threads(address.chatId, threadId), {
        body: { name: threadName(firstPart), auto_archive_duration: 1440 },
      });
    } catch (err) {
      if (!(err instanceof DiscordAPIError)) throw err;
      if (err.code !== THREAD_ALREADY_CREATED) {
        if (err.status >= 500 || err.status === 429) throw err;
        this.logger.warn(
          { error: describeDiscordError(err), channel: address.chatId },
          "discord thread not started; answering in the channel",
        );
        return address.chatId;
      }
    }
    this.noteThread(threadId);
    return threadId;
  }
}
