import { createHmac } from "node:crypto";
import { writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { getRequestListener } from "@hono/node-server";
import { pino } from "pino";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { type FakeWhatsapp, startFakeWhatsapp } from "../../../test/fakes/whatsapp-server.js";
import { createTempDir } from "../../../test/helpers/temp-home.js";
import { waitFor } from "../../../test/helpers/wait-for.js";
import {
  type AcceptResult,
  type ApprovalPress,
  type ApprovalPressResult,
  FileTooLargeError,
  type InboundMessage,
  type InboundSink,
  type OutboundReply,
} from "../../contract/platform.js";
import { SqliteStore } from "../../sessions/sqlite-store.js";
import { WHATSAPP_WEBHOOK_PATH, WhatsappAdapter, type WhatsappAdapterOptions } from "./adapter.js";

const OWNER = "15550001111";
const ADMIN = "15550002222";
const STRANGER = "15550009999";

/** Records what the adapter hands over; can be told to fail the next commits. */
class RecordingSink implements InboundSink {
  readonly received: InboundMessage[] = [];
  readonly presses: ApprovalPress[] = [];
  private readonly keys = new Set<string>();
  calls = 0;
  failures = 0;

  async receive(message: InboundMessage): Promise<AcceptResult> {
    this.calls += 1;
    if (this.failures > 0) {
      this.failures -= 1;
      throw new Error("disk full");
    }
    const key = `${message.chatId}/${message.platformMessageId}`;
    const accepted = !this.keys.has(key);
    if (accepted) {
      this.keys.add(key);
      this.received.push(message);
    }
    return { accepted, inboxId: this.received.length, sessionId: "s" };
  }

  async answerApproval(press: ApprovalPress): Promise<ApprovalPressResult> {
    this.presses.push(press);
    return { toast: "Approved.", cardText: "✅ Approved by you." };
  }
}

describe("WhatsappAdapter against a stand-in Graph API, over real HTTP", () => {
  let fake: FakeWhatsapp;
  let home: ReturnType<typeof createTempDir>;
  let store: SqliteStore;
  let sink: RecordingSink;
  let adapter: WhatsappAdapter;
  let server: Server;
  let webhook: string;

  async function open(overrides: Partial<WhatsappAdapterOptions> = {}): Promise<void> {
    adapter = new WhatsappAdapter({
      phoneNumberId: fake.phoneNumberId,
      accessToken: fake.accessToken,
      appSecret: fake.appSecret,
      verifyToken: "verify-me",
      apiRoot: fake.apiRoot,
      allowedUsers: [OWNER],
      adminUsers: [ADMIN],
      store,
      logger: pino({ level: "silent" }),
      timing: { backoffBaseMs: 20, backoffMaxMs: 100, typingDelayMs: 0 },
      ...overrides,
    });
    server = createServer(getRequestListener(adapter.routes().fetch));
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    webhook = `http://127.0.0.1:${(server.address() as AddressInfo).port}${WHATSAPP_WEBHOOK_PATH}`;
    fake.webhookUrl = webhook;
    await adapter.start(sink);
  }

  const answered = (delivery: { status: number | null }) =>
    waitFor(() => delivery.status !== null, { message: "the webhook answered" }).then(
      () => delivery.status,
    );

  const reply = (over: Partial<OutboundReply>): OutboundReply => ({
    outboxId: 1,
    sessionKey: `agent:main:whatsapp:dm:${OWNER}`,
    sessionId: "s",
    address: { platform: "whatsapp", chatId: OWNER },
    text: "",
    kind: "reply",
    ...over,
  });

  const sends = () =>
    fake.calls.filter((c) => c.path.endsWith("/messages") && c.body.status !== "read");
  const receipts = () => fake.calls.filter((c) => c.body.status === "read");

  beforeEach(async () => {
    fake = await startFakeWhatsapp();
    home = createTempDir("keel-whatsapp-adapter-");
    store = new SqliteStore(join(home.path, "state.db"));
    sink = new RecordingSink();
  });

  afterEach(async () => {
    await adapter.stop();
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
    await fake.close();
    await store.close();
    home.cleanup();
  });

  it("answers Meta's verification handshake only with the verify token", async () => {
    await open();
    const ok = await fetch(
      `${webhook}?hub.mode=subscribe&hub.verify_token=verify-me&hub.challenge=1158201444`,
    );
    expect(ok.status).toBe(200);
    expect(await ok.text()).toBe("1158201444");
    const wrong = await fetch(
      `${webhook}?hub.mode=subscribe&hub.verify_token=guess&hub.challenge=1158201444`,
    );
    expect(wrong.status).toBe(403);
    expect(await wrong.text()).not.toContain("1158201444");
  });

  it("refuses a POST without a valid signature (401) and stores nothing from it", async () => {
    await open();
    const { delivery } = fake.userSends({ from: OWNER, text: "signed" });
    expect(await answered(delivery)).toBe(200);
    const forged = delivery.body.replace("signed", "forged");
    expect(await answered(fake.post(forged, "sha256=" + "0".repeat(64)))).toBe(401);
    expect(await answered(fake.post(forged, ""))).toBe(401);
    // The signature of the genuine body does not cover other bytes.
    const genuine = `sha256=${createHmac("sha256", fake.appSecret).update(delivery.body).digest("hex")}`;
    expect(await answered(fake.post(forged, genuine))).toBe(401);
    expect(sink.received.map((m) => m.text)).toEqual(["signed"]);
    expect(sink.calls).toBe(1);
  });

  it("answers 500 when the commit fails, then stores Meta's redelivery once; read receipts only after a commit", async () => {
    await open();
    sink.failures = 1;
    const { id, delivery } = fake.userSends({ from: OWNER, text: "first try" });
    expect(await answered(delivery)).toBe(500);
    expect(receipts()).toEqual([]);
    expect(await answered(fake.post(delivery.body))).toBe(200);
    expect(await answered(fake.post(delivery.body))).toBe(200);
    expect(sink.received.map((m) => m.platformMessageId)).toEqual([id]);
    await waitFor(() => receipts().length >= 1, { message: "a read receipt" });
    expect(receipts()[0]!.body.message_id).toBe(id);
  });

  it("keeps one sender's messages of one POST in order, with the sender's name and session", async () => {
    await open();
    for (const text of ["one", "two", "three"]) {
      expect(await answered(fake.userSends({ from: OWNER, text, name: "Ada" }).delivery)).toBe(200);
    }
    expect(sink.received.map((m) => m.text)).toEqual(["one", "two", "three"]);
    expect(sink.received[0]).toMatchObject({
      platform: "whatsapp",
      chatId: OWNER,
      senderName: "Ada",
      sessionKey: `agent:main:whatsapp:dm:${OWNER}`,
    });
    expect(sink.received[0]!.operator).toBeUndefined();
  });

  it("gives a stranger a pairing code and stores nothing; an admin user is an operator", async () => {
    await open();
    expect(await answered(fake.userSends({ from: STRANGER, text: "hi" }).delivery)).toBe(200);
    expect(sink.received).toEqual([]);
    expect(fake.botTexts(STRANGER).join("\n")).toMatch(/pairing code is \S+/);
    expect(await answered(fake.userSends({ from: ADMIN, text: "/restart" }).delivery)).toBe(200);
    expect(sink.received.map((m) => [m.text, m.operator])).toEqual([["/restart", true]]);
  });

  it("ignores changes for another phone number of the same app", async () => {
    await open();
    const { id, delivery } = fake.userSends({ from: OWNER, text: "for us" });
    await answered(delivery);
    const other = delivery.body
      .replaceAll(fake.phoneNumberId, "5550000")
      .replace(id, `${id}-other`);
    expect(await answered(fake.post(other.replace("for us", "elsewhere")))).toBe(200);
    expect(sink.received.map((m) => m.text)).toEqual(["for us"]);
  });

  it("splits a long reply at 4096 characters, and a retried row does not send its pieces twice", async () => {
    await open();
    const text = `${"a".repeat(4000)}\n${"b".repeat(4000)}\n${"c".repeat(100)}`;
    const first = sends().length;
    // The first piece goes out; the stand-in refuses the second.
    fake.failNext(131000, "Something went wrong", 1);
    await expect(adapter.deliver(reply({ text }))).rejects.toThrow(/131000/);
    await adapter.deliver(reply({ text }));
    const bodies = sends()
      .slice(first)
      .filter((c) => c.status === 200)
      .map((c) => (c.body.text as { body: string }).body);
    expect(bodies).toEqual(["a".repeat(4000), "b".repeat(4000), "c".repeat(100)]);
    expect(bodies.every((b) => b.length <= 4096)).toBe(true);
  });

  it("says plainly when a reply falls outside the 24-hour window", async () => {
    await open();
    fake.failNext(131047, "Re-engagement message");
    await expect(adapter.deliver(reply({ text: "late" }))).rejects.toThrow(/24 hours/);
  });

  it("asks for approval with reply buttons and decides a press through the sink", async () => {
    await open();
    await adapter.deliver(
      reply({ text: "Run `rm -rf scratch`? /approve a1b2", approvalId: "a1b2", kind: "notice" }),
    );
    const card = sends().at(-1)!.body as {
      type: string;
      interactive: { action: { buttons: { reply: { id: string; title: string } }[] } };
    };
    expect(card.type).toBe("interactive");
    const buttons = card.interactive.action.buttons.map((b) => b.reply);
    expect(buttons.map((b) => b.id)).toEqual(["approve:a1b2", "approve_session:a1b2", "deny:a1b2"]);
    expect(buttons.every((b) => b.title.length <= 20)).toBe(true);

    expect(await answered(fake.userPresses(ADMIN, "approve_session:a1b2"))).toBe(200);
    expect(sink.presses).toEqual([
      expect.objectContaining({
        approvalId: "a1b2",
        decision: "approve_session",
        platform: "whatsapp",
        userId: ADMIN,
        operator: true,
        chatId: ADMIN,
      }),
    ]);
    await waitFor(() => fake.botTexts(ADMIN).includes("✅ Approved by you."), {
      message: "the decision said in the chat",
    });
    expect(sink.received).toEqual([]);
  });

  it("takes media by id (id → URL → bytes) within the size limit", async () => {
    await open();
    const bytes = Buffer.from("fake jpeg bytes");
    fake.addMedia("media-77", bytes, "image/jpeg");
    const { delivery } = fake.userSends({
      from: OWNER,
      media: { type: "image", id: "media-77", mime: "image/jpeg", caption: "look" },
    });
    expect(await answered(delivery)).toBe(200);
    const [message] = sink.received;
    expect(message).toMatchObject({ text: "look" });
    expect(message!.attachments).toEqual([{ kind: "photo", ref: "media-77", mime: "image/jpeg" }]);
    const signal = new AbortController().signal;
    expect(await adapter.fetchFile(message!.attachments![0]!, 1_000, signal)).toEqual(bytes);
    await expect(adapter.fetchFile(message!.attachments![0]!, 4, signal)).rejects.toBeInstanceOf(
      FileTooLargeError,
    );
  });

  it("sends a file the agent made by uploading it, then by media id", async () => {
    await open();
    const path = join(home.path, "chart.png");
    writeFileSync(path, "png bytes");
    await adapter.deliver(
      reply({
        text: "the chart",
        file: { id: "f1", path, name: "chart.png", mime: "image/png", size: 9 },
      }),
    );
    expect(fake.uploads).toEqual([
      { mime: "image/png", name: "chart.png", bytes: Buffer.from("png bytes") },
    ]);
    expect(sends().at(-1)!.body).toMatchObject({
      to: OWNER,
      type: "image",
      image: { id: "upload-1", caption: "the chart" },
    });
  });

  it("shows typing on the user's latest message", async () => {
    await open();
    const { id, delivery } = fake.userSends({ from: OWNER, text: "slow one" });
    await answered(delivery);
    const done = adapter.showTyping({ platform: "whatsapp", chatId: OWNER });
    await waitFor(() => receipts().some((c) => c.body.typing_indicator !== undefined), {
      message: "a typing indicator",
    });
    done();
    const typing = receipts().find((c) => c.body.typing_indicator !== undefined)!;
    expect(typing.body).toMatchObject({ message_id: id, typing_indicator: { type: "text" } });
  });

  it("is connected after a good token check and down when the token is refused", async () => {
    await open();
    expect(adapter.connection()).toMatchObject({
      state: "connected",
      lastEventAt: expect.any(Number),
    });
    await adapter.stop();
    server.close();
    await open({ accessToken: "wrong" });
    expect(adapter.connection().state).toBe("down");
    expect(adapter.status().error).toMatch(/access token/);
  });
});
