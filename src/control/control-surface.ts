/** What the control API and dashboard can see and ask of the gateway. */
export interface GatewayStatus {
  gateway_state: "starting" | "running" | "draining" | "stopping" | "stopped" | "startup_failed";
  pid: number;
  started_at: string;
  uptime_seconds: number;
  version: string;
  active_turns: number;
  draining: boolean;
  restart_requested: boolean;
  /**
   * `state`: the connection's health (`connected`, `reconnecting`, `stalled`, `down`,
   * `disabled`); `last_event_at` / `last_event_age_s`: when the platform was last heard from (an
   * answered poll, a heartbeat ACK, a message), null before the first time.
   */
  platforms: Record<
    string,
    {
      state: string;
      error: string | null;
      last_event_at?: string | null;
      last_event_age_s?: number | null;
    }
  >;
  /** `tools.sandbox` as resolved at start: whether terminal commands run in the sandbox, and why. */
  sandbox?: { mode: "workspace" | "off" | "failed"; detail: string };
  /** MCP servers (when configured): state, why one is down, and its tools while connected. */
  mcp?: Record<string, { state: string; error: string | null; tools: string[] }>;
  turns: {
    session_key: string;
    session_id: string;
    started_at: string;
    current_tool: string | null;
  }[];
  sessions: { total: number; resume_pending: number };
  /** Tasks running or waiting for a slot (src/tasks), oldest first. */
  tasks?: {
    id: number;
    state: string;
    background: boolean;
    chat: string;
    prompt: string;
    started_at: string | null;
  }[];
  /** With a store shared by several gateways: each of them, and the sessions it holds. */
  instances?: {
    id: string;
    host: string;
    pid: number;
    started_at: string;
    heartbeat_at: string;
    /** Seconds since that heartbeat, on the store's clock. */
    heartbeat_age_seconds: number;
    /** It heartbeat within one lease TTL; a dead one's turns are taken over by the others. */
    alive: boolean;
    self: boolean;
    sessions: string[];
  }[];
}

export interface ControlSurface {
  status(): Promise<GatewayStatus>;
  /** Running, accepting turns, platforms connected and resumes dispatched. */
  isReady(): boolean;
  /** Why it is not ready, in a few words (null when ready or when nothing more is known). */
  notReadyReason?(): string | null;
  /** The store cannot be reached right now (its calls fail or hang): reads of it fail too. */
  storeDown?(): boolean;
  /** Writes or removes the drain marker; returns whether a drain is now requested. */
  drain(action: "drain" | "cancel"): Promise<{ draining: boolean }>;
  restart(): Promise<{ accepted: boolean; message: string }>;
  stop(): Promise<{ accepted: boolean; message: string }>;
  /** Called whenever the status may have changed (for the live dashboard stream). */
  onStatusChange(listener: () => void): () => void;
}
