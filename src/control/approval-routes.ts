/**
 * `GET /api/approvals`, `GET /api/approvals/:id` and `POST /api/approvals/:id` (control token):
 * what waits for a human (one approval with its command whole, however long), and answering it
 * from outside the chat (scripts, `keel approvals`, API clients).
 */
import { Hono } from "hono";
import { createMiddleware } from "hono/factory";
import { z } from "zod";
import { isoTime } from "../lib/wire-time.js";
import type { ApprovalRecord } from "../sessions/store.js";
import { httpError } from "./http-errors.js";
import type { AppEnv } from "./http-server.js";
import { readJson } from "./node-request.js";

const DecisionBody = z.strictObject({ decision: z.enum(["approve", "approve_session", "deny"]) });

/** What the routes need from approvals. */
export interface ApprovalDesk {
  list(state?: "pending"): Promise<ApprovalRecord[]>;
  get(id: string): Promise<ApprovalRecord | null>;
  /** Decides as an operator; says whether it was decided now, already, or is unknown. */
  decide(
    id: string,
    decision: z.output<typeof DecisionBody>["decision"],
  ): Promise<{ status: "decided" | "already" | "unknown"; record?: ApprovalRecord }>;
}

export function createApprovalRoutes(desk: ApprovalDesk): Hono<AppEnv> {
  const app = new Hono<AppEnv>();
  app.use("/api/approvals/*", operatorOnly);
  app.use("/api/approvals", operatorOnly);

  app.get("/api/approvals", async (c) => {
    const all = c.req.query("all") !== undefined;
    const records = await desk.list(all ? undefined : "pending");
    return c.json({ approvals: records.map(approvalJson) });
  });

  app.get("/api/approvals/:id", async (c) => {
    const id = c.req.param("id");
    const record = await desk.get(id);
    if (!record) throw httpError("NOT_FOUND", `No approval has the id ${id}.`);
    return c.json({ approval: approvalJson(record) });
  });

  app.post("/api/approvals/:id", async (c) => {
    const parsed = DecisionBody.safeParse(await readJson(c));
    if (!parsed.success) {
      throw httpError(
        "BAD_REQUEST",
        'Body must be {"decision":"approve"}, {"decision":"approve_session"} or {"decision":"deny"}.',
      );
    }
    const id = c.req.param("id");
    const outcome = await desk.decide(id, parsed.data.decision);
    if (outcome.status === "unknown" || !outcome.record) {
      throw httpError("NOT_FOUND", `No approval has the id ${id}.`);
    }
    if (outcome.status === "already") {
      const { decision, decidedBy } = outcome.record;
      const by = decidedBy ? ` by ${decidedBy}` : "";
      throw httpError(
        "APPROVAL_ANSWERED",
        `Approval ${id} was already answered: ${decision}${by}.`,
      );
    }
    return c.json({ approval: approvalJson(outcome.record) });
  });
  return app;
}

const operatorOnly = createMiddleware<AppEnv>(async (c, next) => {
  if (!c.get("access")?.operator) {
    throw httpError(
      "UNAUTHORIZED",
      "The control API needs the control token (Authorization: Bearer <token>).",
    );
  }
  await next();
});

/** The wire shape of an approval (snake_case, ISO times). */
export function approvalJson(r: ApprovalRecord) {
  return {
    id: r.id,
    state: r.state,
    decision: r.decision,
    decided_by: r.decidedBy,
    session_key: r.sessionKey,
    session_id: r.sessionId,
    tool: r.toolName,
    /** The call whole, as it will run (cards may show only its head and tail). */
    summary: r.summary,
    rule: r.rule,
    reason: r.reason,
    requester: r.requester,
    chat: r.address,
    created_at: isoTime(r.createdAt),
    deadline_at: isoTime(r.deadlineAt),
    decided_at: isoTime(r.decidedAt),
  };
}
