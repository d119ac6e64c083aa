/**
 * The email adapter against real servers: a private Dovecot (IMAP with IDLE) holding Keel's
 * mailbox and its users', and an SMTP receiver in the test tree delivering Keel's mail into them.
 */
import { join } from "node:path";
import { pino } from "pino";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { startTcpProxy, type TcpProxy } from "../../../test/fakes/tcp-proxy.js";
import { type MailWorld, startMailWorld } from "../../../test/helpers/mail-world.js";
import { dovecotInstalled } from "../../../test/helpers/private-dovecot.js";
import { createTempDir } from "../../../test/helpers/temp-home.js";
import { waitFor } from "../../../test/helpers/wait-for.js";
import { connectionLeaseKey, StoreConnectionLease } from "../../cluster/connection-lease.js";
import type {
  AcceptResult,
  ApprovalPress,
  InboundMessage,
  InboundSink,
  OutboundReply,
} from "../../contract/platform.js";
import { SqliteStore } from "../../sessions/sqlite-store.js";
import { EmailAdapter, type EmailAdapterOptions } from "./adapter.js";

/** Commits to the store as the runner does; can hold commits back, and records what it took. */
class RecordingSink implements InboundSink {
  readonly messages: InboundMessage[] = [];
  readonly presses: ApprovalPress[] = [];
  /** Calls to receive, committed or still held. */
  entered = 0;
  private gate: Promise<void> | null = null;
  private open: () => void = () => {};
  constructor(private readonly store: SqliteStore) {}
  hold(): void {
    this.gate = new Promise((resolve) => {
      this.open = resolve;
    });
  }
  release(): void {
    this.gate = null;
    this.open();
  }
  async receive(message: InboundMessage): Promise<AcceptResult> {
    this.entered += 1;
    await this.gate;
    const result = await this.store.acceptInbound(message);
    if (result.accepted) this.messages.push(message);
    return { accepted: result.accepted, inboxId: result.item.id, sessionId: result.item.sessionId };
  }
  async answerApproval(press: ApprovalPress) {
    this.presses.push(press);
    return { toast: "noted", cardText: `Decided: ${press.decision}` };
  }
  texts(): string[] {
    return this.messages.map((m) => m.text);
  }
}

const silent = pino({ level: "silent" });

describe.runIf(dovecotInstalled())("EmailAdapter against Dovecot and an SMTP server", () => {
  let world: MailWorld;
  let home: ReturnType<typeof createTempDir>;
  let store: SqliteStore;
  let sink: RecordingSink;
  const adapters: EmailAdapter[] = [];
  const proxies: TcpProxy[] = [];
  let alice: string;
  let bob: string;

  async function open(overrides: Partial<EmailAdapterOptions> = {}): Promise<EmailAdapter> {
    const adapter = new EmailAdapter({
      imap: {
        host: "127.0.0.1",
        port: world.dovecot.imapPort,
        user: "keel",
        password: world.dovecot.user("keel").password,
        folder: "Keel",
      },
      smtp: {
        host: "127.0.0.1",
        port: world.smtp.port,
        user: world.smtp.user,
        password: world.smtp.password,
      },
      address: world.keelAddress,
      allowedSenders: [alice],
      adminSenders: [world.address("carol")],
      store,
      logger: silent,
      timing: { backoffBaseMs: 20, backoffMaxMs: 200 },
      ...overrides,
    });
    adapters.push(adapter);
    await adapter.start(sink);
    return adapter;
  }

  beforeEach(async () => {
    world = await startMailWorld();
    home = createTempDir("keel-email-adapter-");
    store = new SqliteStore(join(home.path, "state.db"));
    sink = new RecordingSink(store);
    alice = world.address("alice");
    bob = world.address("bob");
  });

  afterEach(async () => {
    for (const adapter of adapters.splice(0)) await adapter.stop();
    for (const proxy of proxies.splice(0)) await proxy.close();
    await store.close();
    await world.close();
    home.cleanup();
  });

  const stored = (count: number) =>
    waitFor(() => sink.messages.length >= count, {
      timeoutMs: 15_000,
      message: `${count} stored: ${JSON.stringify(sink.texts())}`,
    });
  const filed = (count: number) =>
    waitFor(async () => (await world.keelFolder("Keel")).messages >= count, {
      timeoutMs: 15_000,
      message: `${count} filed in Keel`,
    });

  it("stores a mail, then marks it seen and moves it out of INBOX; the thread is the session", async () => {
    const adapter = await open();
    expect(adapter.connection().state).toBe("connected");
    const first = await world.send({ from: alice, subject: "Plans", text: "What is on today?" });
    await stored(1);
    await filed(1);
    expect(await world.keelFolder("INBOX")).toEqual({ messages: 0, unseen: 0 });
    expect(await world.keelFolder("Keel")).toEqual({ messages: 1, unseen: 0 });
    const [message] = sink.messages;
    expect(message!.text).toBe("Subject: Plans\n\nWhat is on today?");
    expect(message!.platformMessageId).toBe(first.messageId);
    expect(message!.address).toMatchObject({
      chatId: alice,
      threadId: first.messageId,
      replyToMessageId: first.messageId,
    });
    // A reply in the thread lands in the same session; a new mail starts another.
    await world.send({
      from: alice,
      subject: "Re: Plans",
      text: "And tomorrow?\n\nOn Mon, Alice wrote:\n> What is on today?",
      inReplyTo: first.messageId,
      references: [first.messageId],
    });
    await world.send({ from: alice, subject: "Other", text: "Something else" });
    await stored(3);
    expect(sink.messages[1]!.text).toBe("And tomorrow?");
    expect(sink.messages[1]!.sessionKey).toBe(message!.sessionKey);
    expect(sink.messages[2]!.sessionKey).not.toBe(message!.sessionKey);
  });

  it("acknowledges a mail only once it is committed", async () => {
    await open();
    sink.hold();
    await world.send({ from: alice, text: "held back" });
    // Read, but its commit is held: it stays unseen in INBOX.
    await waitFor(() => sink.entered === 1, { timeoutMs: 15_000, message: "the mail read" });
    expect(await world.keelFolder("INBOX")).toEqual({ messages: 1, unseen: 1 });
    sink.release();
    await stored(1);
    await filed(1);
    expect(await world.keelFolder("INBOX")).toEqual({ messages: 0, unseen: 0 });
  });

  it("reads again after a restart what was not acknowledged, and stores a redelivered mail once", async () => {
    await open();
    const mail = await world.send({ from: alice, text: "only once" });
    await stored(1);
    await filed(1);
    await world.redeliver(mail.raw);
    await world.send({ from: alice, text: "and then this" });
    await filed(3);
    expect(sink.texts()).toEqual([
      "Subject: Hello\n\nonly once",
      "Subject: Hello\n\nand then this",
    ]);
  });

  it("answers a stranger with a pairing code by mail and stores nothing", async () => {
    await open();
    await world.send({ from: bob, subject: "Hi there", text: "let me in" });
    const [answer] = await waitFor(
      async () => {
        const got = await world.received("bob");
        return got.length > 0 ? got : null;
      },
      { timeoutMs: 15_000, message: "bob's pairing code" },
    );
    expect(answer!.text).toMatch(/pairing code is \w+/);
    expect(answer!.subject).toBe("Re: Hi there");
    await filed(1);
    expect(sink.messages).toEqual([]);
  });

  it("never answers auto-replies, bulk and list mail, bounces or its own mail", async () => {
    await open();
    const sender = (user: string) => `${user}@${world.dovecot.domain}`;
    await world.send({ from: bob, text: "away", headers: { "Auto-Submitted": "auto-replied" } });
    await world.send({ from: bob, text: "news", headers: { Precedence: "bulk" } });
    await world.send({ from: bob, text: "list", headers: { Precedence: "list" } });
    await world.send({ from: sender("mailer-daemon"), text: "Undelivered Mail Returned" });
    await world.send({ from: sender("postmaster"), text: "delivery report" });
    await world.send({ from: world.keelAddress, text: "my own" });
    await world.send({ from: alice, text: "list too", headers: { "List-Id": "<l.example.test>" } });
    await filed(7);
    // Were any answered, bob (or the machines) would have mail, and the stranger a pairing code.
    await world.send({ from: alice, text: "a real one" });
    await stored(1);
    await filed(8);
    expect(sink.texts()).toEqual(["Subject: Hello\n\na real one"]);
    expect(world.smtp.mails).toEqual([]);
  });

  it("reads HTML mail as text, and marks mail from admin_senders as an operator's", async () => {
    await open();
    await world.send({
      from: world.address("carol"),
      subject: "Report",
      html: "<html><body><p>Hello <b>Keel</b>,</p><ul><li>one</li><li>two</li></ul></body></html>",
    });
    await stored(1);
    const [message] = sink.messages;
    expect(message!.text).toContain("Hello Keel,");
    expect(message!.text).toMatch(/one[\s\S]*two/);
    expect(message!.text).not.toContain("<");
    expect(message!.operator).toBe(true);
  });

  it("replies in the thread: Re: subject, In-Reply-To, References, nothing quoted, files attached", async () => {
    await open();
    const first = await world.send({ from: alice, subject: "Numbers", text: "Send me the file" });
    await stored(1);
    const message = sink.messages[0]!;
    const reply: OutboundReply = {
      outboxId: 7,
      sessionKey: message.sessionKey,
      sessionId: "s1",
      address: message.address,
      text: "Here it is.",
      kind: "reply",
    };
    const adapter = adapters[0]!;
    await adapter.deliver(reply);
    const filePath = join(home.path, "numbers.csv");
    const { writeFileSync } = await import("node:fs");
    writeFileSync(filePath, "a,b\n1,2\n");
    await adapter.deliver({
      ...reply,
      outboxId: 8,
      text: "The numbers",
      file: { id: "f1", path: filePath, name: "numbers.csv", mime: "text/csv", size: 8 },
    });
    const got = await waitFor(
      async () => {
        const mails = await world.received("alice");
        return mails.length >= 2 ? mails : null;
      },
      { timeoutMs: 15_000, message: "two replies" },
    );
    const [text, file] = got;
    expect(text!.subject).toBe("Re: Numbers");
    expect(text!.inReplyTo).toBe(first.messageId);
    expect(text!.references).toEqual([first.messageId]);
    expect(text!.text).toBe("Here it is.");
    expect(text!.from).toBe(world.keelAddress);
    expect(text!.headers.get("auto-submitted")).toBe("auto-replied");
    // Keel's own mail joins the thread's chain.
    expect(file!.references).toEqual([first.messageId, text!.messageId]);
    expect(file!.attachments.map((a) => [a.filename, a.content.toString()])).toEqual([
      ["numbers.csv", "a,b\n1,2\n"],
    ]);
    // The same outbox row sent again carries the same Message-ID (a resend after a crash).
    await adapter.deliver(reply);
    const again = await waitFor(
      async () => {
        const mails = await world.received("alice");
        return mails.length >= 3 ? mails : null;
      },
      { timeoutMs: 15_000, message: "the resend" },
    );
    expect(again[2]!.messageId).toBe(text!.messageId);
  });

  it("takes an approval answered by a one-word reply to the question mail", async () => {
    const adapter = await open();
    await world.send({ from: alice, subject: "Clean up", text: "remove scratch" });
    await stored(1);
    const message = sink.messages[0]!;
    await adapter.deliver({
      outboxId: 11,
      sessionKey: message.sessionKey,
      sessionId: "s1",
      address: message.address,
      text: "Approval needed [ap1]: /approve ap1 or /deny ap1",
      kind: "notice",
      approvalId: "ap1",
    });
    const [question] = await waitFor(
      async () => {
        const got = await world.received("alice");
        return got.length > 0 ? got : null;
      },
      { timeoutMs: 15_000, message: "the question" },
    );
    expect(question!.text).toContain("approve, session");
    await world.send({
      from: alice,
      subject: question!.subject,
      text: "Approve\n\nOn Tue, Keel wrote:\n> Approval needed",
      inReplyTo: question!.messageId,
      references: question!.references.concat(question!.messageId),
    });
    const outcome = await waitFor(
      async () => {
        const got = await world.received("alice");
        return got.length > 1 ? got[1] : null;
      },
      { timeoutMs: 15_000, message: "the outcome" },
    );
    expect(sink.presses).toEqual([
      expect.objectContaining({
        approvalId: "ap1",
        decision: "approve",
        userId: alice,
        chatId: alice,
      }),
    ]);
    expect(outcome!.text).toBe("Decided: approve");
    expect(sink.messages).toHaveLength(1);
  });

  it("fetches a file a user attached from the stored mail", async () => {
    const adapter = await open();
    await world.send({
      from: alice,
      text: "see attached",
      attachments: [
        { filename: "notes.txt", content: "remember the milk", contentType: "text/plain" },
      ],
    });
    await stored(1);
    await filed(1);
    const [attachment] = sink.messages[0]!.attachments!;
    expect(attachment).toMatchObject({ kind: "document", name: "notes.txt", mime: "text/plain" });
    const bytes = await adapter.fetchFile(attachment!, 1_000_000);
    expect(bytes.toString()).toBe("remember the milk");
  });

  it("drops a session whose NOOP gets no answer, reconnects, and reads on", async () => {
    const proxy = await startTcpProxy({ host: "127.0.0.1", port: world.dovecot.imapPort });
    proxies.push(proxy);
    const adapter = await open({
      imap: {
        host: "127.0.0.1",
        port: proxy.port,
        user: "keel",
        password: world.dovecot.user("keel").password,
        folder: "Keel",
      },
      timing: { refreshMs: 300, noopTimeoutMs: 300, backoffBaseMs: 20, backoffMaxMs: 100 },
    });
    await world.send({ from: alice, text: "before" });
    await stored(1);
    proxy.freeze();
    await waitFor(() => adapter.connection().state === "reconnecting", {
      timeoutMs: 10_000,
      message: "the stall noticed",
    });
    proxy.thaw();
    await waitFor(() => adapter.connection().state === "connected", {
      timeoutMs: 10_000,
      message: "connected again",
    });
    await world.send({ from: alice, text: "after" });
    await stored(2);
  });

  it("is down, not retrying, when the IMAP login is refused", async () => {
    const adapter = await open({
      imap: {
        host: "127.0.0.1",
        port: world.dovecot.imapPort,
        user: "keel",
        password: "wrong",
        folder: "Keel",
      },
    });
    await waitFor(() => adapter.connection().state === "down", { timeoutMs: 15_000 });
    expect(adapter.status().error).toMatch(/refused the login/);
  });
});

describe.runIf(dovecotInstalled())(
  "EmailAdapter with a connection lease (several gateways)",
  () => {
    it("reads the mailbox only while it holds the lease; the standby takes over", async () => {
      const world = await startMailWorld();
      const home = createTempDir("keel-email-lease-");
      // One store holds the lease (as the shared database would); each gateway keeps its own
      // record, so a standby that read the mailbox anyway would store what the holder took.
      const shared = new SqliteStore(join(home.path, "lease.db"));
      const stores = [0, 1].map((i) => new SqliteStore(join(home.path, `gw${i}.db`)));
      const sinks = stores.map((store) => new RecordingSink(store));
      const alice = world.address("alice");
      const adapters = stores.map(
        (store, i) =>
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
            allowedSenders: [alice],
            adminSenders: [],
            store,
            logger: silent,
            timing: { backoffBaseMs: 20, backoffMaxMs: 100 },
            connection: new StoreConnectionLease({
              store: shared,
              key: connectionLeaseKey("email", "keel@127.0.0.1"),
              owner: `gw-${i}`,
              ttlMs: 60_000,
              logger: silent,
              claimEveryMs: 20,
            }),
          }),
      );
      try {
        await adapters[0]!.start(sinks[0]!);
        await adapters[1]!.start(sinks[1]!);
        for (const n of [1, 2, 3])
          await world.send({ from: alice, subject: "", text: `first ${n}` });
        await waitFor(() => sinks[0]!.messages.length === 3 || sinks[1]!.messages.length === 3, {
          timeoutMs: 15_000,
          message: "the holder took them",
        });
        const held = sinks[0]!.messages.length === 3 ? 0 : 1;
        const standby = 1 - held;
        await adapters[held]!.stop();
        await world.send({ from: alice, subject: "", text: "second" });
        await waitFor(() => sinks[standby]!.texts().includes("second"), {
          timeoutMs: 15_000,
          message: "the standby took over",
        });
        expect(sinks[standby]!.texts()).toEqual(["second"]);
        expect(sinks[held]!.texts()).toEqual(["first 1", "first 2", "first 3"]);
      } finally {
        for (const adapter of adapters) await adapter.stop();
        for (const store of [...stores, shared]) await store.close();
        await world.close();
        home.cleanup();
      }
    });
  },
);
