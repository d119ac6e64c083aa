/**
 * The platform contract suite: what every chat platform must do, checked the same way on each,
 * through the real gateway in this process, a fake model and the platform's stand-in (the web
 * chat over its real WebSocket). Like the store's contract suite, one list of entries runs
 * through one set of cases; a platform joins by adding its entry to PLATFORMS, and where it has
 * no such thing (no acknowledgement, no typing, no lease) its entry says why, which the suite
 * prints as the case's skip reason. What is truly one platform's own (Telegram HTML, Discord
 * RESUME, Slack envelopes) stays in that platform's own tests.
 */
import { fsync, writeFileSync } from "node:fs";
import { join } from "node:path";
import pino from "pino";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { WebSocket } from "ws";
import { connectionLeaseKey, StoreConnectionLease } from "../src/cluster/connection-lease.js";
import { loadConfig } from "../src/config/load-config.js";
import type { ConnectionLease, PlatformAdapter } from "../src/contract/platform.js";
import type { Gateway } from "../src/gateway/gateway.js";
import { DiscordAdapter } from "../src/platforms/discord/adapter.js";
import { EmailAdapter } from "../src/platforms/email/adapter.js";
import { MatrixAdapter } from "../src/platforms/matrix/adapter.js";
import { TelegramAdapter } from "../src/platforms/telegram/adapter.js";
import { SUBPROTOCOL } from "../src/platforms/webchat/adapter.js";
import { TOKEN_SUBPROTOCOL_PREFIX } from "../src/platforms/webchat/upgrade-auth.js";
import { SqliteStore } from "../src/sessions/sqlite-store.js";
import type { Store } from "../src/sessions/store.js";
import type { FsyncFn } from "../src/sessions/wal-sync.js";
import { type FakeDiscord, type FakeUser, startFakeDiscord } from "./fakes/discord-server.js";
import { type FakeMatrix, startFakeMatrix } from "./fakes/matrix-server.js";
import { type FakeOpenAI, startFakeOpenAI } from "./fakes/openai-server.js";
import { type FakeSlack, startFakeSlack } from "./fakes/slack-server.js";
import { type FakeTelegram, startFakeTelegram } from "./fakes/telegram-server.js";
import { type FakeWhatsapp, startFakeWhatsapp } from "./fakes/whatsapp-server.js";
import { createTestGateway, stopTestGateway } from "./helpers/in-process-gateway.js";
import { type MailWorld, startMailWorld } from "./helpers/mail-world.js";
import { dovecotInstalled } from "./helpers/private-dovecot.js";
import { postgresHarness } from "./helpers/store-harness.js";
import { StoreSink } from "./helpers/store-sink.js";
import { createTempDir } from "./helpers/temp-home.js";
import { waitFor } from "./helpers/wait-for.js";

// ---------------------------------------------------------------------------------------------
// What an entry fills in
// ---------------------------------------------------------------------------------------------

/** One platform in the suite: what it counts as an ack, what it lacks, and its stand-in. */
interface PlatformEntry {
  /** The platform's name (`ChatAddress.platform`, the key in `/api/status`). */
  name: string;
  /**
   * What the platform counts as acknowledging a message it delivered (named in the case), or
   * why it has no acknowledgement.
   */
  ack: string | { none: string };
  /** Why the platform has none of these, where it has none: the case is skipped, naming it. */
  none?: { rateLimit?: string; typing?: string; lease?: string };
  /** Starts the stand-in for one test. */
  standIn(): Promise<StandIn>;
}

/** A platform's stand-in, with one user and their chat, as the cases drive it. */
interface StandIn {
  /** Environment that turns the platform on in a gateway, pointed at the stand-in. */
  env: Record<string, string>;
  /** Joins the chat once the gateway runs (the web chat opens its socket); optional. */
  join?(gateway: Gateway, controlToken: string): Promise<void>;
  /** The user writes `text` in their chat. */
  say(text: string): Said;
  /** What the user sees from Keel in the chat (replies, notices, cards), latest text, oldest first. */
  seen(): string[];
  /** How a chat command starts: `/`, or `!` where the platform keeps `/` for its own. */
  sigil: "/" | "!";
  /** The platform refuses the next reply with its rate limit, asking for `seconds` of patience. */
  rateLimit?: RateLimitRig;
  /** When the typing indicator was sent to the chat (epoch ms), oldest first. */
  typing?: () => number[];
  /** Two gateways on one store, of which the one holding the connection lease receives. */
  lease?: LeaseRig;
  close(): Promise<void>;
}

/** A message the user wrote. */
interface Said {
  /** The platform counts it acknowledged (per the entry's `ack`); absent where it has none. */
  acked?(): boolean | Promise<boolean>;
  /** The platform delivers it again, as after an acknowledgement that was lost. */
  redeliver(): void;
}

interface RateLimitRig {
  next(seconds: number): void;
  /** The attempts to post a reply to the chat, with when each came and whether it was refused. */
  attempts(): { at: number; limited: boolean }[];
}

interface LeaseRig {
  /** What one gateway at a time holds (said in the case's name). */
  holds: string;
  /** The lease key (`connectionLeaseKey(platform, credential)`). */
  key: string;
  /** The platform's adapter as one gateway on `store` builds it, holding its connection by `lease`. */
  adapter(store: Store, lease: ConnectionLease): PlatformAdapter;
  /** The user writes `text` in their chat. */
  say(text: string): void;
}

// ---------------------------------------------------------------------------------------------
// The entries
// ---------------------------------------------------------------------------------------------

const silent = pino({ level: "silent" });

const telegram: PlatformEntry = {
  name: "telegram",
  ack: "the getUpdates offset confirmed past it",
  async standIn() {
    const token = "123456:contract-token";
    const user = 4242;
    const fake: FakeTelegram = await startFakeTelegram({ token });
    const sends = () =>
      fake.sent.filter(
        (c) => c.method === "sendMessage" && String(c.payload.chat_id) === `${user}`,
      );
    return {
      env: {
        TELEGRAM_BOT_TOKEN: token,
        TELEGRAM_API_ROOT: fake.apiRoot,
        TELEGRAM_ALLOWED_USERS: String(user),
      },
      say(text) {
        const { update_id, message_id } = fake.sendUserMessage({ chatId: user, text });
        return {
          acked: () => fake.confirmedOffset() > update_id,
          // Telegram sends an update again when its confirmation (the next offset) was lost.
          redeliver: () => {
            fake.pushUpdate({
              message: {
                message_id,
                date: Math.floor(Date.now() / 1000),
                chat: { id: user, type: "private" },
                from: { id: user, is_bot: false, first_name: "Tester" },
                text,
              },
            });
          },
        };
      },
      seen: () =>
        fake
          .chatLog(user)
          .filter((e) => e.from === "bot")
          .map((e) => e.text),
      sigil: "/",
      rateLimit: {
        next: (seconds) => fake.failNext("sendMessage", { error_code: 429, retry_after: seconds }),
        attempts: () => sends().map((c) => ({ at: c.at, limited: c.errorCode === 429 })),
      },
      typing: () =>
        fake.sent
          .filter((c) => c.method === "sendChatAction" && String(c.payload.chat_id) === `${user}`)
          .map((c) => c.at),
      lease: {
        holds: "the getUpdates poller of a bot token",
        key: connectionLeaseKey("telegram", token),
        adapter: (store, lease) =>
          new TelegramAdapter({
            token,
            apiRoot: fake.apiRoot,
            allowedUsers: [String(user)],
            groupSessionsPerUser: false,
            pairing: store,
            logger: silent,
            timing: { pollTimeoutSec: 1, backoffBaseMs: 20, backoffMaxMs: 100 },
            poller: lease,
          }),
        say: (text) => void fake.sendUserMessage({ chatId: user, text }),
      },
      close: () => fake.close(),
    };
  },
};

const discord: PlatformEntry = {
  name: "discord",
  ack: "the sequence a RESUME replays after moved past it",
  async standIn() {
    const token = "discord-contract-token";
    const user: FakeUser = { id: "300000000000000001", username: "owner" };
    const fake: FakeDiscord = await startFakeDiscord({ token });
    const dm = fake.dmChannel(user.id);
    const inDm = (path: string) => path === `/channels/${dm}/messages`;
    return {
      env: {
        DISCORD_BOT_TOKEN: token,
        DISCORD_API_ROOT: fake.apiRoot,
        DISCORD_ALLOWED_USERS: user.id,
      },
      say(text) {
        const message = fake.userSends({ channelId: dm, user, content: text });
        return {
          // Discord acknowledges nothing a bot receives: what plays the part is the sequence
          // the bot resumes from (Discord replays everything after it). Asked by a reconnect.
          acked: async () => {
            const resumes = fake.resumes().length;
            fake.requestReconnect();
            await waitFor(() => fake.resumes().length > resumes, { message: "a RESUME" });
            return fake.resumes().at(-1)!.seq >= fake.sequenceOf(message.id)!;
          },
          redeliver: () => fake.redeliver(message),
        };
      },
      seen: () => fake.botMessages(dm).map((m) => m.content),
      sigil: "/",
      rateLimit: {
        next: (seconds) => fake.failSends(1, "429", seconds),
        attempts: () =>
          fake.requestLog
            .filter((r) => r.method === "POST" && inDm(r.path))
            .map((r) => ({ at: r.at, limited: r.status === 429 })),
      },
      typing: () =>
        fake.requestLog
          .filter((r) => r.method === "POST" && r.path === `/channels/${dm}/typing`)
          .map((r) => r.at),
      lease: {
        holds: "the gateway connection of a bot token",
        key: connectionLeaseKey("discord", token),
        adapter: (store, lease) =>
          new DiscordAdapter({
            token,
            apiRoot: fake.apiRoot,
            allowedUsers: [user.id],
            adminUsers: [],
            freeChannels: [],
            store,
            logger: silent,
            timing: {
              watchdogCheckMs: 50,
              backoffBaseMs: 20,
              backoffMaxMs: 200,
              stopTimeoutMs: 1_000,
              identifySpacingMs: 10,
              identifyMaxSpacingMs: 50,
            },
            connection: lease,
          }),
        say: (text) => void fake.userSends({ channelId: dm, user, content: text }),
      },
      close: () => fake.close(),
    };
  },
};

const slack: PlatformEntry = {
  name: "slack",
  ack: "the Socket Mode envelope acknowledged",
  none: {
    typing: "Slack gives bots no typing indicator outside the RTM API, which Keel does not use",
    lease:
      "Socket Mode hands each envelope to one of the app's open connections: every gateway may connect, none holds a lease",
  },
  async standIn() {
    const owner = "UOWNER";
    const dm = "D1";
    const fake: FakeSlack = await startFakeSlack();
    return {
      env: {
        SLACK_APP_TOKEN: fake.appToken,
        SLACK_BOT_TOKEN: fake.botToken,
        SLACK_API_ROOT: fake.apiRoot,
        SLACK_ALLOWED_USERS: owner,
      },
      say(text) {
        fake.userPosts({ channel: dm, user: owner, text });
        const envelope = fake.envelopes.at(-1)!;
        return {
          acked: () => envelope.acked,
          // Slack retries an event whose envelope was not acknowledged in time.
          redeliver: () => void fake.sendEvent(envelope.event),
        };
      },
      seen: () => fake.botMessages(dm).map((m) => m.text),
      sigil: "!",
      rateLimit: {
        next: (seconds) =>
          fake.fail("chat.postMessage", { kind: "rate_limited", retryAfter: seconds }),
        attempts: () =>
          fake.calls
            .filter((c) => c.method === "chat.postMessage" && c.args.channel === dm)
            .map((c) => ({ at: c.at, limited: c.outcome === "rate_limited" })),
      },
      close: () => fake.close(),
    };
  },
};

const webchat: PlatformEntry = {
  name: "webchat",
  ack: "the ack frame",
  none: {
    rateLimit: "the web chat is Keel's own socket: nothing rate-limits its replies",
    typing:
      "the page shows a running turn from the live turn_start frame: there is no indicator to pace",
    lease:
      "a browser talks to the gateway it connected to: there is no platform connection to hand over",
  },
  async standIn() {
    const conversation = "contract";
    const frames: Record<string, unknown>[] = [];
    let socket: WebSocket | null = null;
    let sent = 0;
    const send = (frame: Record<string, unknown>) => socket!.send(JSON.stringify(frame));
    return {
      env: { KEEL_WEBCHAT_ENABLED: "true" },
      async join(gateway, controlToken) {
        socket = new WebSocket(`ws://127.0.0.1:${gateway.port}/ws`, [
          SUBPROTOCOL,
          `${TOKEN_SUBPROTOCOL_PREFIX}${controlToken}`,
        ]);
        socket.on("message", (data) => frames.push(JSON.parse(String(data))));
        await new Promise<void>((resolve, reject) => {
          socket!.once("open", () => resolve());
          socket!.once("error", reject);
        });
        send({ type: "open", conversation_id: conversation, after_seq: 0 });
        await waitFor(() => frames.some((f) => f.type === "synced"), {
          message: "web chat synced",
        });
      },
      say(text) {
        sent += 1;
        const frame = { type: "send", conversation_id: conversation, client_id: `c${sent}`, text };
        send(frame);
        return {
          acked: () => frames.some((f) => f.type === "ack" && f.client_id === frame.client_id),
          // A page that saw no ack (a dropped socket) sends the message again with its client id.
          redeliver: () => send(frame),
        };
      },
      seen: () => {
        const bySeq = new Map<number, string>();
        for (const f of frames) {
          if (f.type === "event" && (f.kind === "reply" || f.kind === "notice")) {
            bySeq.set(Number(f.seq), String(f.text));
          }
        }
        return [...bySeq.entries()].sort(([a], [b]) => a - b).map(([, text]) => text);
      },
      sigil: "/",
      close: async () => {
        socket?.terminate();
      },
    };
  },
};

const whatsapp: PlatformEntry = {
  name: "whatsapp",
  ack: "the webhook POST answered 200",
  none: {
    lease:
      "Meta POSTs each webhook to the one public URL: whichever gateway answers it takes the message, none holds a connection",
  },
  async standIn() {
    const user = "15550001234";
    const fake: FakeWhatsapp = await startFakeWhatsapp();
    const sends = () =>
      fake.calls.filter(
        (c) => c.path.endsWith("/messages") && c.body.to === user && c.body.type === "text",
      );
    return {
      env: {
        WHATSAPP_PHONE_NUMBER_ID: fake.phoneNumberId,
        WHATSAPP_ACCESS_TOKEN: fake.accessToken,
        WHATSAPP_APP_SECRET: fake.appSecret,
        WHATSAPP_VERIFY_TOKEN: "contract-verify",
        WHATSAPP_API_ROOT: fake.apiRoot,
        WHATSAPP_ALLOWED_USERS: user,
      },
      async join(gateway) {
        fake.webhookUrl = `http://127.0.0.1:${gateway.port}/platforms/whatsapp/webhook`;
      },
      say(text) {
        const { delivery } = fake.userSends({ from: user, text });
        return {
          acked: () => delivery.status === 200,
          // Meta POSTs a webhook again when it did not get a 200 in time.
          redeliver: () => void fake.post(delivery.body),
        };
      },
      seen: () => fake.botTexts(user),
      sigil: "/",
      rateLimit: {
        next: (seconds) => fake.rateLimitNext(seconds),
        attempts: () => sends().map((c) => ({ at: c.at, limited: c.status === 429 })),
      },
      typing: () =>
        fake.calls
          .filter((c) => c.path.endsWith("/messages") && c.body.typing_indicator !== undefined)
          .map((c) => c.at),
      close: () => fake.close(),
    };
  },
};

const matrix: PlatformEntry = {
  name: "matrix",
  ack: "the /sync `since` token stored past it",
  async standIn() {
    const user = "@owner:fake.test";
    const room = "!dm:fake.test";
    const fake: FakeMatrix = await startFakeMatrix();
    fake.setMembers(room, [fake.userId, user]);
    const inRoom = (path: string) => path.includes(`/rooms/${room}/send/`);
    return {
      env: {
        MATRIX_HOMESERVER: fake.homeserver,
        MATRIX_USER_ID: fake.userId,
        MATRIX_ACCESS_TOKEN: fake.accessToken,
        MATRIX_ALLOWED_USERS: user,
      },
      say(text) {
        const { event, position } = fake.userSays({ roomId: room, sender: user, body: text });
        return {
          // The next /sync names a position past it only once the batch before it is committed.
          acked: () => fake.sinceSeen.some((since) => since >= position),
          redeliver: () => fake.replay(event, room),
        };
      },
      seen: () => fake.botTexts(room),
      sigil: "/",
      rateLimit: {
        next: (seconds) => fake.rateLimitNext(seconds * 1000),
        attempts: () =>
          fake.calls
            .filter((c) => c.method === "PUT" && inRoom(c.path))
            .map((c) => ({ at: c.at, limited: c.status === 429 })),
      },
      typing: () =>
        fake.calls
          .filter((c) => c.path.includes(`/rooms/${room}/typing/`) && c.body.typing === true)
          .map((c) => c.at),
      lease: {
        holds: "the /sync of the bot account",
        key: connectionLeaseKey("matrix", fake.accessToken),
        adapter: (store, lease) =>
          new MatrixAdapter({
            homeserver: fake.homeserver,
            userId: fake.userId,
            accessToken: fake.accessToken,
            allowedUsers: [user],
            adminUsers: [],
            store,
            logger: silent,
            timing: { pollTimeoutMs: 200, backoffBaseMs: 20, backoffMaxMs: 100 },
            connection: lease,
          }),
        say: (text) => void fake.userSays({ roomId: room, sender: user, body: text }),
      },
      close: () => fake.close(),
    };
  },
};

const email: PlatformEntry = {
  name: "email",
  ack: "marked seen and moved out of INBOX",
  none: {
    rateLimit:
      "an SMTP server's temporary refusal (4xx) names no wait to honour: the outbox retries it on its own backoff",
    typing: "mail has no typing indicator, and a reply cannot be edited: it is sent once, final",
  },
  async standIn() {
    const world: MailWorld = await startMailWorld();
    const user = world.address("alice");
    // No subject: the body alone is the message (a new thread's subject would lead it).
    const send = (text: string) => world.send({ from: user, subject: "", text });
    return {
      env: world.env([user]),
      say(text) {
        const sent = send(text);
        return {
          acked: async () => world.filed((await sent).messageId),
          // A copy of the same mail arrives again (a provider's redelivery, a restored backup).
          redeliver: () => void sent.then((mail) => world.redeliver(mail.raw)),
        };
      },
      seen: () =>
        world.smtp.mails.filter((m) => !m.refused && m.to.includes(user)).map((m) => m.text),
      sigil: "/",
      lease: {
        holds: "the IMAP session on the mailbox",
        key: connectionLeaseKey("email", `keel@127.0.0.1:${world.dovecot.imapPort}`),
        adapter: (store, lease) =>
          new EmailAdapter({
            imap: {
              host: "127.0.0.1",
              port: world.dovecot.imapPort,
              user: "keel",
              password: world.dovecot.user("keel").password,
              folder: "Keel",
            },
            smtp: { host: "127.0.0.1", port: world.smtp.port },
            address: world.keelAddress,
            allowedSenders: [user],
            adminSenders: [],
            store,
            logger: silent,
            timing: { backoffBaseMs: 20, backoffMaxMs: 100 },
            connection: lease,
          }),
        say: (text) => void send(text),
      },
      close: () => world.close(),
    };
  },
};

/** Every platform the contract covers (email where Debian's Dovecot is installed to run it). */
const PLATFORMS: PlatformEntry[] = [
  telegram,
  discord,
  slack,
  webchat,
  whatsapp,
  matrix,
  ...(dovecotInstalled() ? [email] : []),
];

// ---------------------------------------------------------------------------------------------
// The cases
// ---------------------------------------------------------------------------------------------

/** Holds the store's WAL flushes while `held`: a commit is then written but not yet durable. */
class FsyncGate {
  private held = false;
  private readonly waiting: (() => void)[] = [];
  readonly fsync: FsyncFn = (fd, done) => {
    if (this.held) this.waiting.push(() => fsync(fd, done));
    else fsync(fd, done);
  };
  hold(): void {
    this.held = true;
  }
  release(): void {
    this.held = false;
    for (const flush of this.waiting.splice(0)) flush();
  }
}

/** A reply of `count` sentences, streamed a piece at a time. */
function sentences(count: number): string {
  return Array.from({ length: count }, (_, i) => `Sentence number ${i + 1} is here.`).join(" ");
}

/** Whether `text` is in the inbox, open or already taken into a turn's transcript. */
async function written(store: SqliteStore, text: string): Promise<boolean> {
  if ((await store.listOpenInbox()).some((item) => item.text === text)) return true;
  for (const session of await store.listSessions({ internal: false })) {
    for (const row of await store.loadTranscript(session.sessionId)) {
      if (row.message.role === "user" && JSON.stringify(row.message.content).includes(text)) {
        return true;
      }
    }
  }
  return false;
}

/** How often `text` was stored as a user message, over every session. */
async function storedTimes(gateway: Gateway, text: string): Promise<number> {
  let count = 0;
  for (const session of await gateway.store.listSessions({ internal: false })) {
    for (const row of await gateway.store.loadTranscript(session.sessionId)) {
      if (row.message.role === "user" && JSON.stringify(row.message.content).includes(text)) {
        count += 1;
      }
    }
  }
  return count;
}

/** What a stand-in offers for a case, or an error saying the entry must say why it has none. */
function offered<T>(value: T | undefined, entry: PlatformEntry, what: string): T {
  if (value === undefined) {
    throw new Error(
      `the ${entry.name} stand-in offers no ${what}: give it, or say why in \`none\``,
    );
  }
  return value;
}

/** A case, or (`none` given) a skipped one whose name says why the platform has no such thing. */
function contract(title: string, none: string | undefined, body: () => Promise<void>): void {
  if (none) it.skip(`${title} (none: ${none})`, body);
  else it(title, body);
}

// The lease cases run on Postgres, as a cluster of gateways does.
const pg = postgresHarness();

describe.each(PLATFORMS.map((entry) => [entry.name, entry] as const))(
  "platform contract: %s",
  (name, entry) => {
    let home: ReturnType<typeof createTempDir>;
    let model: FakeOpenAI;
    let standIn: StandIn;
    let gateway: Gateway | undefined;

    beforeEach(async () => {
      home = createTempDir(`keel-contract-${name}-`);
      model = await startFakeOpenAI();
      standIn = await entry.standIn();
    });
    afterEach(async () => {
      await stopTestGateway(gateway);
      gateway = undefined;
      await standIn.close();
      await model.close();
      home.cleanup();
    });

    /** Starts a gateway on the stand-in and waits until the platform is connected. */
    async function start(options: { yaml?: string; fsync?: FsyncFn } = {}): Promise<Gateway> {
      if (options.yaml) writeFileSync(join(home.path, "config.yaml"), options.yaml);
      const { config } = loadConfig({
        home: home.path,
        env: {
          KEEL_WEBCHAT_ENABLED: "false",
          ...standIn.env,
          OPENAI_BASE_URL: model.baseUrl,
          KEEL_MODEL: "fake-model",
          KEEL_HTTP_PORT: "0",
        },
      });
      gateway = createTestGateway(config, options.fsync ? { sqliteFsync: options.fsync } : {});
      await gateway.start();
      const running = gateway;
      await waitFor(async () => (await running.status()).platforms[name]?.state === "connected", {
        timeoutMs: 15_000,
        message: `${name} connected`,
      });
      await standIn.join?.(running, config.controlToken);
      return running;
    }

    const sees = (text: string) =>
      waitFor(() => standIn.seen().some((t) => t.includes(text)), {
        timeoutMs: 20_000,
        message: `"${text}" in the chat: ${JSON.stringify(standIn.seen())}`,
      });

    const ack = entry.ack;
    contract(
      `acknowledges a message only once it is committed (${typeof ack === "string" ? ack : "no ack"})`,
      typeof ack === "string" ? undefined : ack.none,
      async () => {
        const gate = new FsyncGate();
        await start({ fsync: gate.fsync });
        const observer = new SqliteStore(join(home.path, "state.db"));
        try {
          gate.hold();
          const said = standIn.say("echo: held back");
          const acked = offered(said.acked, entry, "acknowledgement");
          // Written but not yet durable: the platform must not count it received. Its turn
          // starts meanwhile (runner.receive), so it may already have left the open inbox.
          await waitFor(() => written(observer, "echo: held back"), {
            timeoutMs: 15_000,
            message: "the message written, its flush held",
          });
          expect(await acked()).toBe(false);
          gate.release();
          await waitFor(() => acked(), { timeoutMs: 15_000, message: String(ack) });
          await sees("held back");
        } finally {
          gate.release();
          await observer.close();
        }
      },
    );

    contract("stores a redelivered message once", undefined, async () => {
      const gw = await start();
      const said = standIn.say("echo: only once");
      await sees("only once");
      said.redeliver();
      // Each platform takes a chat's messages in order: once the next one is answered, the
      // redelivery has been handled.
      standIn.say("echo: and then this");
      await sees("and then this");
      expect(await storedTimes(gw, "echo: only once")).toBe(1);
      expect(standIn.seen().filter((t) => t === "only once")).toHaveLength(1);
    });

    contract(
      "honours a 429's retry_after, and the reply arrives once",
      entry.none?.rateLimit,
      async () => {
        const rate = offered(standIn.rateLimit, entry, "rate limit");
        await start({ yaml: "display:\n  streaming: false\n" });
        rate.next(1);
        standIn.say("echo: patience");
        await sees("patience");
        const attempts = rate.attempts();
        expect(attempts.map((a) => a.limited)).toEqual([true, false]);
        expect(attempts[1]!.at - attempts[0]!.at).toBeGreaterThanOrEqual(990);
        expect(standIn.seen().filter((t) => t === "patience")).toHaveLength(1);
      },
    );

    contract(
      "shows typing only once a turn has run for the typing delay",
      entry.none?.typing,
      async () => {
        const typing = offered(standIn.typing, entry, "typing indicator");
        await start();
        const asked = Date.now();
        standIn.say("slow: 2500 worth the wait");
        await sees("worth the wait");
        const times = typing();
        expect(times.length).toBeGreaterThanOrEqual(1);
        // The delay (1 s on Telegram and Discord) counts from the turn's start, after the commit.
        expect(times[0]! - asked).toBeGreaterThanOrEqual(995);
      },
    );

    contract("delivers a streamed reply once, as one final message", undefined, async () => {
      const reply = sentences(30);
      model.script({ text: reply, chunkDelayMs: 30 });
      await start();
      standIn.say("write a lot");
      await waitFor(() => standIn.seen().includes(reply), {
        timeoutMs: 30_000,
        message: `the whole reply: ${JSON.stringify(standIn.seen())}`,
      });
      expect(standIn.seen()).toEqual([reply]);
    });

    contract(
      "asks for an approval in the chat and runs the call once it is answered there",
      undefined,
      async () => {
        await start();
        standIn.say("run: rm -rf scratch && echo approved-run");
        const approve = `${standIn.sigil}approve`;
        const question = await waitFor(
          () => standIn.seen().find((t) => t.includes(`${approve} `)),
          { timeoutMs: 20_000, message: `an approval question: ${JSON.stringify(standIn.seen())}` },
        );
        const id = /[/!]approve (\S+)/.exec(question)![1]!;
        standIn.say(`${approve} ${id}`);
        await sees("ran: approved-run");
      },
    );

    contract(
      "hands its connection to another gateway when the lease holder lets go (Postgres)",
      entry.none?.lease,
      async () => {
        const lease = offered(standIn.lease, entry, "connection lease");
        await pg.setup();
        const stores = [await pg.open(), await pg.open()];
        const adapters: PlatformAdapter[] = [];
        try {
          const sinks = stores.map((store) => new StoreSink(store));
          for (const [index, store] of stores.entries()) {
            const held = new StoreConnectionLease({
              store,
              key: lease.key,
              owner: `gw-${index}`,
              ttlMs: 60_000,
              logger: silent,
              claimEveryMs: 20,
            });
            const adapter = lease.adapter(store, held);
            adapters.push(adapter);
            await adapter.start(sinks[index]!);
          }
          lease.say("first");
          // Whichever gateway claimed the lease first holds it: both start claiming at once.
          const holder = await waitFor(
            () => {
              const index = sinks.findIndex((sink) => sink.accepted.includes("first"));
              return index >= 0 ? { index } : null;
            },
            { timeoutMs: 15_000, message: "the holder took it" },
          );
          const [held, standby] = holder.index === 0 ? [0, 1] : [1, 0];
          expect(adapters[held]!.connection?.().state).toBe("connected");
          expect(adapters[held]!.connection?.().lastEventAt).toEqual(expect.any(Number));

          await adapters[held]!.stop();
          lease.say("second");
          await waitFor(() => sinks[standby]!.accepted.includes("second"), {
            timeoutMs: 15_000,
            message: `the standby took over ${lease.holds}`,
          });
          expect(sinks[held]!.accepted).toEqual(["first"]);
          expect(sinks[standby]!.accepted).toEqual(["second"]);
          expect(adapters[held]!.connection?.().state).toBe("disabled");
        } finally {
          for (const adapter of adapters) await adapter.stop();
          await Promise.all(stores.map((s) => s.close()));
          await pg.teardown();
        }
      },
    );
  },
);
