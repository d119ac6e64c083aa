/**
 * `GET /metrics`: the Prometheus text. Who may read it is the access gate's rule (the control
 * token, or `metrics.token`, which opens this route and nothing else).
 */
import { Hono } from "hono";
import type { AppEnv } from "../control/http-server.js";
import type { GatewayMetrics } from "./gateway-metrics.js";

export function createMetricsRoute(metrics: GatewayMetrics): Hono<AppEnv> {
  const app = new Hono<AppEnv>();
  app.get("/metrics", async (c) =>
    c.body(await metrics.render(), 200, { "content-type": metrics.contentType }),
  );
  return app;
}
