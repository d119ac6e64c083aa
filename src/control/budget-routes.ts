/**
 * `GET /api/usage` (control token): budgets per key, spend per chat and user, pauses waiting;
 * `POST /api/approvals/:id` for a budget pause (id `b-…`): answered like an approval, with
 * `{"decision":"approve"|"raise"|"deny"}` (`approve_session`, the card's middle button, raises).
 * Registered before the approval routes: other ids go on to them.
 */
import { Hono } from "hono";
import { z } from "zod";
import { httpError } from "./http-errors.js";
import type { AppEnv } from "./http-server.js";
import { readJson } from "./node-request.js";

const DecisionBody = z.strictObject({
  decision: z.enum(["approve", "raise", "approve_session", "deny"]),
});

export interface BudgetDesk {
  isPauseId(id: string): boolean;
  report(): Promise<unknown>;
  decide(
    id: string,
    decision: "approve" | "raise" | "deny",
  ): Promise<{ status: "decided" | "already" | "forbidden" | "unknown"; record?: unknown }>;
}

export function createBudgetRoutes(desk: BudgetDesk): Hono<AppEnv> {
  const app = new Hono<AppEnv>();
  const operator = (c: { get(key: "access"): { operator?: boolean } | undefined }) => {
    if (!c.get("access")?.operator) {
      throw httpError(
        "UNAUTHORIZED",
        "The control API needs the control token (Authorization: Bearer <token>).",
      );
    }
  };

  app.get("/api/usage", async (c) => {
    operator(c);
    return c.json(await desk.report());
  });

  app.post("/api/approvals/:id", async (c, next) => {
    const id = c.req.param("id");
    if (!desk.isPauseId(id)) {
      await next();
      return;
    }
    operator(c);
    const parsed = DecisionBody.safeParse(await readJson(c));
    if (!parsed.success) {
      throw httpError(
        "BAD_REQUEST",
        'Body must be {"decision":"approve"}, {"decision":"raise"} or {"decision":"deny"}.',
      );
    }
    const { decision } = parsed.data;
    const outcome = await desk.decide(id, decision === "approve_session" ? "raise" : decision);
    if (outcome.status === "unknown") {
      throw httpError("NOT_FOUND", `No budget pause has the id ${id}.`);
    }
    if (outcome.status === "already") {
      throw httpError("APPROVAL_ANSWERED", `Budget pause ${id} was already answered.`);
    }
    return c.json({ pause: outcome.record });
  });
  return app;
}
