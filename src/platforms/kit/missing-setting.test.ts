import { describe, expect, it } from "vitest";
import { missingSetting } from "./missing-setting.js";

describe("missingSetting", () => {
  const needed = { token: "platforms.chat.token (CHAT_TOKEN)", room: "platforms.chat.room" };

  it("names the first needed setting that is unset or empty, in the order given", () => {
    expect(missingSetting({ token: undefined, room: undefined }, needed)).toBe(
      "platforms.chat.token (CHAT_TOKEN)",
    );
    expect(missingSetting({ token: "t", room: "" }, needed)).toBe("platforms.chat.room");
  });

  it("is null when every needed setting is set, whatever else is not", () => {
    expect(missingSetting({ token: "t", room: "r", other: undefined }, needed)).toBeNull();
  });
});
