import { describe, expect, it } from "vitest";
import { parseClientMessage } from "./protocol.js";

describe("a web chat attachment with a long name", () => {
  it("goes through with its name cut to 255 bytes instead of refusing the message", () => {
    const name = `${"é".repeat(300)}.txt`; // 604 bytes, 304 characters
    const parsed = parseClientMessage(
      JSON.stringify({
        type: "send",
        conversation_id: "c1",
        client_id: "m1",
        text: "",
        attachments: [
          { upload_id: "0f3c1b2a-1111-4222-8333-944455556666", name, mime: "text/plain", size: 3 },
        ],
      }),
    );
    expect(parsed.ok).toBe(true);
    const sent = parsed.ok && parsed.message.type === "send" ? parsed.message : null;
    const cut = sent?.attachments?.[0]?.name ?? "";
    expect(Buffer.byteLength(cut)).toBeLessThanOrEqual(255);
    expect(cut).toMatch(/^é+\.txt$/);
  });
});
