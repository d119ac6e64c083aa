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
  platforms: Record<string, { state: string; error: string | null }>;
  turns: {
    session_key: string;
    session_id: string;
    started_at: string;
    current_tool: string | null;
  }[];
  sessions: { total: number; resume_pending: number };
}

export interface ControlSurface {
  status(): Promise<GatewayStatus>;
  /** Running, accepting turns, platforms connected and resumes dispatched. */
  isReady(): boolean;
  /** Writes or removes the drain marker; returns whether a drain is now requested. */
  drain(action: "drain" | "cancel"): Promise<{ draining: boolean }>;
  restart(): Promise<{ accepted: boolean; message: string }>;
  stop(): Promise<{ accepted: boolean; message: string }>;
  /** Called whenever the status may have changed (for the live dashboard stream). */
  onStatusChange(listener: () => void): () => void;
}
