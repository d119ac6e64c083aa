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
  it("measures a prompt once for its estimate and the observation that follows", () => {
    const gauge = new TokenGauge();
    const tools = [tool("shell")];
    const prompt: ChatMessage[] = [{ role: "user", content: "x".repeat(400) }];
    const raw = rawTokens(prompt, tools);
    expect(gauge.estimate(prompt, tools)).toBe(raw);
    // The same array of the same length is taken as the same prompt (the agent loop builds a new
    // array for every call and never changes one it has measured): not looked at again.
    prompt[0] = { role: "user", content: "short" };
    expect(rawTokens(prompt, tools)).toBeLessThan(raw);
    expect(gauge.raw(prompt, tools)).toBe(raw);
    gauge.observe(gauge.raw(prompt, tools), raw * 2);
    expect(gauge.correction).toBe(2);
    // Another prompt (or the same array grown) is measured anew.
    const next: ChatMessage[] = [...prompt, { role: "assistant", content: "ok" }];
    expect(gauge.raw(next, tools)).toBe(rawTokens(next, tools));
    prompt.push({ role: "assistant", content: "ok" });
    expect(gauge.raw(prompt, tools)).toBe(rawTokens(prompt, tools));
  });
});
