/** The store contract for a session's credential, on every implementation (see store.test.ts). */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { storeHarnesses } from "../../test/helpers/store-harness.js";
import type { InboundMessage } from "../contract/platform.js";
import type { Store } from "./store.js";

const KEY = "agent:main:api:0f3c";

function apiMessage(id: string, credential?: string): InboundMessage {
  return {
    platform: "api",
    chatId: KEY,
    platformMessageId: id,
    sessionKey: KEY,
    text: `message ${id}`,
    address: { platform: "api", chatId: KEY },
    ...(credential !== undefined && { credential }),
  };
}

describe.each(storeHarnesses())("the $name store: session credentials", (harness) => {
  let store: Store;

  beforeEach(async () => {
    await harness.setup();
    store = await harness.open(() => 1_000);
  });
  afterEach(async () => {
    await store.close();
    await harness.teardown();
  });

  it("records the credential of the message that created the session, and only that one", async () => {
    const { item } = await store.acceptInbound(apiMessage("1", "api_key:aa11"));
    await store.acceptInbound(apiMessage("2", "control_token"));
    expect((await store.getSessionById(item.sessionId))?.credential).toBe("api_key:aa11");
    expect((await store.getSession(KEY))?.credential).toBe("api_key:aa11");
    // The record holds what the adapter gave, nothing else.
    expect(await harness.rows("SELECT credential FROM sessions")).toEqual([
      { credential: "api_key:aa11" },
    ]);
  });

  it("keeps the credential across /new", async () => {
    await store.acceptInbound(apiMessage("1", "api_key:aa11"));
    const fresh = await store.resetSession(KEY);
    expect(fresh.credential).toBe("api_key:aa11");
  });

  it("leaves it null for sessions created without one (chat platforms)", async () => {
    const { item } = await store.acceptInbound(apiMessage("1"));
    expect((await store.getSessionById(item.sessionId))?.credential).toBeNull();
    expect((await store.ensureSession("agent:main:telegram:dm:42", null)).credential).toBeNull();
  });
});
