/**
 * The stand-in model of the chaos harness, as a script for the fake OpenAI server. A user
 * message reads `<id> <kind>` (e.g. `c3.7 tool`); the kind decides the tool calls before the
 * answer. Side-effecting tool calls append their own tool-call id to a ledger file, so a
 * duplicate id in the ledger is a tool that ran twice. The answer lists the ids of every user
 * message the model saw since its last answer: `re c3.7 c3.8 r41` (the `r` number is unique per
 * answer, so the same text delivered twice is a duplicate delivery).
 */
import { INTERRUPTED_MARK } from "../../src/platforms/stream-editor.js";
import { UNKNOWN_OUTCOME } from "../../src/runner/texts.js";
import type {
  FakeChatRequest,
  FakeScript,
  FakeStep,
  FakeToolCall,
} from "../fakes/openai-server.js";
import { hashString } from "./prng.js";

export const MESSAGE_KINDS = [
  "plain",
  "slow",
  "tool",
  "slowtool",
  "read",
  "multi",
  "chain",
  // Tasks (src/tasks): a waiting `delegate` whose child runs a tool, and `/bg` (sent as a command).
  "delegate",
  "bgtask",
] as const;
export type MessageKind = (typeof MESSAGE_KINDS)[number];

/** The file every `read` tool call reads (relative to the agent's working folder). */
export const READ_FILE_NAME = "notes.txt";
export const READ_FILE_TEXT = "chaos notes: nothing to see";

const ID_PATTERN = /\bc\d+\.\d+\b/g;
/** How a background task's result starts in its parent's transcript (src/tasks/task-texts.ts). */
const TASK_NOTE = "[Keel: background task";
/** How a background task's result starts in the chat. */
const TASK_DONE = /^🧵 task \d+ done\n/;
const INTERRUPTED_TEXT = INTERRUPTED_MARK.trim();

export interface ChaosModel {
  script: FakeScript;
  /** Every tool call the model asked for: id -> tool name. */
  readonly toolCalls: Map<string, string>;
  /** Tool call ids the model later saw with the "outcome unknown" result. */
  readonly unknownOutcomeSeen: Set<string>;
  /** Tool call ids of read-only calls the model later saw with a real result. */
  readonly readResultSeen: Set<string>;
  /** Answers given (final replies). */
  answers(): number;
}

export interface ChaosModelOptions {
  /** Absolute path of the side-effect ledger. */
  ledger: string;
  /** Varies delays between runs with different seeds. */
  seed: number;
  /** Longest "slow" model call, ms (default 1500). */
  maxSlowMs?: number;
}

type Message = FakeChatRequest["messages"][number];

function textOf(message: Message): string {
  const content = message.content;
  if (typeof content === "string") return content;
  if (Array.isArray(content)) return content.map((p) => p.text ?? "").join("");
  return "";
}

function kindOf(text: string): MessageKind {
  const word = text.replace(ID_PATTERN, "").trim().split(/\s+/)[0] ?? "";
  return (MESSAGE_KINDS as readonly string[]).includes(word) ? (word as MessageKind) : "plain";
}

export function createChaosModel(options: ChaosModelOptions): ChaosModel {
  const toolCalls = new Map<string, string>();
  const unknownOutcomeSeen = new Set<string>();
  const readResultSeen = new Set<string>();
  let nextCall = 0;
  let answers = 0;
  const maxSlow = options.maxSlowMs ?? 1500;

  const terminal = (command: (id: string) => string): FakeToolCall => {
    const id = `call_chaos_${++nextCall}`;
    toolCalls.set(id, "terminal");
    return { id, name: "terminal", arguments: { command: command(id) } };
  };
  const echo = (id: string) => `echo ${id} >> '${options.ledger}'`;
  const read = (): FakeToolCall => {
    const id = `call_chaos_${++nextCall}`;
    toolCalls.set(id, "read_file");
    return { id, name: "read_file", arguments: { path: READ_FILE_NAME } };
  };
  const delegate = (id: string): FakeToolCall => {
    const callId = `call_chaos_${++nextCall}`;
    toolCalls.set(callId, "delegate");
    return { id: callId, name: "delegate", arguments: { task: `${id} child` } };
  };
  const stepsFor = (kind: MessageKind | "child", id: string): (() => FakeToolCall[])[] => {
    switch (kind) {
      case "delegate":
        return [() => [delegate(id)]];
      // A task's child runs a side-effecting tool before it answers.
      case "child":
        return [() => [terminal(echo)]];
      case "tool":
        return [() => [terminal(echo)]];
      case "slowtool":
        return [() => [terminal((id) => `sleep 0.4; ${echo(id)}`)]];
      case "read":
        return [() => [read()]];
      case "multi":
        return [() => [terminal(echo), read()]];
      case "chain":
        return [() => [terminal(echo)], () => [terminal(echo)]];
      default:
        return [];
    }
  };

  const noteResults = (messages: Message[]) => {
    for (const m of messages) {
      if (m.role !== "tool" || typeof m.tool_call_id !== "string") continue;
      const text = textOf(m);
      if (text === UNKNOWN_OUTCOME) unknownOutcomeSeen.add(m.tool_call_id);
      else if (text.includes(READ_FILE_TEXT)) readResultSeen.add(m.tool_call_id);
    }
  };

  const script: FakeScript = (request): FakeStep => {
    const messages = request.messages;
    // A compaction's summary request: answered with a summary, which is not a reply to anyone.
    const last = messages.at(-1);
    if (last && /summari[sz]e/i.test(textOf(last))) {
      return { text: "Summary: a chaos conversation of numbered messages.", delayMs: 20 };
    }
    noteResults(messages);
    const lastAnswer = messages.findLastIndex(
      (m) => m.role === "assistant" && !(m.tool_calls as unknown[] | undefined)?.length,
    );
    // A background task's result, recorded in its parent's transcript, is not a new request.
    const open = messages
      .map((m, index) => ({ m, index }))
      .filter(({ m, index }) => index > lastAnswer && m.role === "user")
      .filter(({ m }) => !textOf(m).startsWith(TASK_NOTE));
    const ids = open.flatMap(({ m }) => textOf(m).match(ID_PATTERN) ?? []);
    const target = open.at(-1);
    const child = messages.some((m) => m.role === "user" && textOf(m).startsWith("[Task "));
    const kind = child ? "child" : target ? kindOf(textOf(target.m)) : "plain";
    const stepsDone = target
      ? messages.slice(target.index + 1).filter((m) => m.role === "assistant").length
      : 0;
    const steps = stepsFor(kind, ids.at(-1) ?? "");
    const key = `${options.seed}:${ids.join(",")}:${stepsDone}`;
    const jitter = hashString(key) % 150;
    if (stepsDone < steps.length) return { toolCalls: steps[stepsDone]!(), delayMs: jitter };
    answers += 1;
    const delayMs = kind === "slow" ? 300 + (hashString(key) % Math.max(1, maxSlow - 300)) : jitter;
    return { text: `re ${[...new Set(ids)].join(" ")} r${answers}`, delayMs };
  };

  return { script, toolCalls, unknownOutcomeSeen, readResultSeen, answers: () => answers };
}

/**
 * The user-message ids a bot message answers, judged on what the chat finally shows: empty for
 * notices, tool lines, and a streamed reply that was cut off (it carries the interrupted mark).
 */
export function answeredIds(replyText: string): string[] {
  // A background task's answer arrives as the task's result.
  const text = replyText.replace(TASK_DONE, "");
  if (!text.startsWith("re ") || text.includes(INTERRUPTED_TEXT)) return [];
  return text.match(ID_PATTERN) ?? [];
}
