/**
 * The agent (like pi-mono's `Agent`): what a turn needs around the loop, assembled at the start
 * of each turn from what the gateway built once — the system prompt with the user's memory, the
 * context keeper of the session, the model client that resolves images — and then the loop
 * (agent-loop.ts) over the transcript the runner rebuilt.
 */

import type { ChatAddress } from "../contract/platform.js";
import { runAgentLoop } from "./agent-loop.js";
import { type ImageInputState, withImageInput } from "./image-input.js";
import type { ModelChainRequest } from "./model-chain.js";
import type {
  ChatMessage,
  CompactionSink,
  LlmResult,
  ModelCallGate,
  PromptKeeper,
  ToolGate,
  ToolRegistry,
  ToolSpec,
  TurnEvent,
  TurnJournal,
  TurnResult,
} from "./types.js";

/** What one turn hands the agent (the runner builds it, src/runner/turn.ts). */
export interface TurnInput {
  history: ChatMessage[];
  signal: AbortSignal;
  journal: TurnJournal;
  onEvent(event: TurnEvent): void;
  takeSteeredInput(): string[];
  /** The chat this turn answers, if any (tools that act on "this chat" need it). */
  chat?: ChatAddress | null;
  /** Tells the chat once per session that the model refused the images it was sent. */
  onImagesRefused?(): void;
  /** The transcript the turn runs in. */
  sessionId?: string;
  /** The session key, and who started the turn (for tools that act for them: `delegate`). */
  sessionKey?: string;
  requester?: string | null;
  /** The summary standing in for the transcript's older messages (its latest compaction). */
  summary?: string | null;
  /** Records a compaction made during the turn (one store transaction). */
  compactionSink?: CompactionSink;
  /** The model the session chose with `/model`. */
  preferredModel?: string | null;
  /** Whose memory file the turn uses (`<platform>-<user id>`), if anyone's. */
  memoryUser?: string | null;
  /** Approvals for this turn's tool calls; absent: every call runs. */
  gate?: ToolGate;
  /** Budgets for this turn's model calls; absent: every call goes ahead. */
  modelGate?: ModelCallGate;
  /** Functions the `/v1` client offers; the turn ends at a call to one (`clientToolCalls`). */
  clientTools?: ToolSpec[];
}

/** The session's context keeper for a turn (src/context builds it over its windows and gauges). */
export interface KeeperRequest {
  sessionId: string;
  summary: string | null;
  sink: CompactionSink;
  preferred: string | null;
}

export interface AgentOptions {
  /** The one model client (model-client.ts): a call is filed under its transcript. */
  model: { complete(request: ModelChainRequest, sessionId?: string): Promise<LlmResult> };
  tools: ToolRegistry;
  /** The fixed part of the system prompt (who the agent is, its working folder, the operator's). */
  basePrompt: string;
  /** `model.vision`: images travel as pixels until the endpoint refuses them. */
  vision: boolean;
  maxIterations: number;
  /** The tools' working folder. */
  cwd: string;
  /** The prompt block of a user's memory file, read at the start of each of their turns. */
  memory?(user: string): string;
  /** Keeps each prompt inside the model's window; absent: the whole history is sent. */
  keeper?(request: KeeperRequest): Promise<PromptKeeper>;
}

export class Agent {
  /** Learned once per process: after the endpoint refused images, images go as notes. */
  private readonly images: ImageInputState = { refused: false };

  constructor(private readonly options: AgentOptions) {}

  /** Runs one turn to its end; never throws for model or tool failures (agent-loop.ts). */
  async runTurn(input: TurnInput): Promise<TurnResult> {
    const { options } = this;
    const preferred = input.preferredModel ?? null;
    // Read at the start of each turn: a change the memory tool makes shows from the next turn.
    const memory = input.memoryUser && options.memory ? options.memory(input.memoryUser) : "";
    const keeper =
      input.sessionId && input.compactionSink && options.keeper
        ? await options.keeper({
            sessionId: input.sessionId,
            summary: input.summary ?? null,
            sink: input.compactionSink,
            preferred,
          })
        : undefined;
    const model = options.model;
    return runAgentLoop({
      llm: withImageInput(
        { complete: (request) => model.complete(request, input.sessionId) },
        {
          vision: options.vision,
          state: this.images,
          ...(input.onImagesRefused && { onImagesRefused: input.onImagesRefused }),
        },
      ),
      tools: options.tools,
      systemPrompt: [options.basePrompt, memory].filter(Boolean).join("\n\n"),
      ...(keeper && { keeper }),
      ...(preferred && { preferredModel: preferred }),
      memoryUser: input.memoryUser ?? null,
      sessionId: input.sessionId ?? null,
      sessionKey: input.sessionKey ?? null,
      requester: input.requester ?? null,
      history: input.history,
      maxIterations: options.maxIterations,
      cwd: options.cwd,
      signal: input.signal,
      journal: input.journal,
      onEvent: input.onEvent,
      takeSteeredInput: input.takeSteeredInput,
      chat: input.chat ?? null,
      ...(input.gate && { gate: input.gate }),
      ...(input.modelGate && { modelGate: input.modelGate }),
      ...(input.clientTools?.length && { clientTools: input.clientTools }),
    });
  }
}
