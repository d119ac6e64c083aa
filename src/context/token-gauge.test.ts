import { describe, expect, it } from "vitest";
import type { ChatMessage, ToolSpec } from "../agent/types.js";
import { rawTokens, TokenGauge } from "./token-gauge.js";

const tool = (name: string): ToolSpec => ({
  type: "function",
  function: { name, description: `The ${name} tool`, parameters: { type: "object" } },
});

describe("rawTokens", () => {
  it("counts a quarter of the characters of the messages and the tools as JSON", () => {
    const messages: ChatMessage[] = [
      { role: "system", content: "Be brief." },
      { role: "user", content: "hello there" },
    ];
    const tools = [tool("read_file"), tool("write_file"), tool("shell")];
    const json = JSON.stringify(messages).length + JSON.stringify(tools).length;
    expect(rawTokens(messages, tools)).toBe(Math.ceil(json / 4));
    expect(rawTokens(messages, [])).toBe(Math.ceil(JSON.stringify(messages).length / 4));
    expect(rawTokens([], [tool("one")])).toBe(
      Math.ceil((2 + JSON.stringify([tool("one")]).length) / 4),
    );
  });
});

describe("TokenGauge", () => {
  it("corrects the character count by what the model reported, within bounds", () => {
    const gauge = new TokenGauge();
    const prompt: ChatMessage[] = [{ role: "user", content: "x".repeat(400) }];
    const raw = rawTokens(prompt, []);
    expect(gauge.estimate(prompt, [])).toBe(raw);
    gauge.observe(raw, raw * 2);
    expect(gauge.estimate(prompt, [])).toBe(gauge.corrected(raw));
    expect(gauge.corrected(raw)).toBe(raw * 2);
    gauge.observe(raw, raw * 10);
    expect(gauge.correction).toBe(3);
  });
});
