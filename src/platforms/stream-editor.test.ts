import { describe, expect, it } from "vitest";
import { ChatGate, toolLine } from "./stream-editor.js";

describe("toolLine", () => {
  it("shows the tool and the first line of its command or path", () => {
    expect(toolLine("terminal", JSON.stringify({ command: "npm test\nnpm run lint" }))).toBe(
      "⚙️ terminal: `npm test`",
    );
    expect(toolLine("read_file", JSON.stringify({ path: "notes.md" }))).toBe(
      "📄 read_file: `notes.md`",
    );
  });

  it("keeps the line short and its code span intact", () => {
    const line = toolLine("terminal", JSON.stringify({ command: `echo \`${"x".repeat(200)}\`` }));
    expect(line.length).toBeLessThanOrEqual("⚙️ terminal: ``".length + 80);
    expect(line.endsWith("…`")).toBe(true);
    expect(line.slice("⚙️ terminal: `".length, -1)).not.toContain("`");
  });

  it("shows only the tool's name when the arguments say nothing usable", () => {
    expect(toolLine("schedule", "not json")).toBe("⚙️ schedule");
    expect(toolLine("schedule", JSON.stringify({ every: "5m" }))).toBe("⚙️ schedule");
  });
});

describe("ChatGate", () => {
  it("spaces calls per chat, and a flood wait pushes the next call back", () => {
    let now = 1_000;
    const gate = new ChatGate(() => now);
    const dm = { platform: "telegram", chatId: "1" };
    const other = { platform: "telegram", chatId: "2" };
    expect(gate.readyAt(dm)).toBe(0);
    gate.note(dm, 1000);
    expect(gate.readyAt(dm)).toBe(2_000);
    expect(gate.readyAt(other)).toBe(0);
    gate.suspend(dm, 30_000);
    expect(gate.readyAt(dm)).toBe(31_000);
    // A later ordinary call never shortens a flood wait.
    now = 1_500;
    gate.note(dm, 1000);
    expect(gate.readyAt(dm)).toBe(31_000);
  });
});
