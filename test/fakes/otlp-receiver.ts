/**
 * A stand-in OpenTelemetry collector on a real loopback socket: accepts OTLP/HTTP JSON on
 * `POST /v1/traces` (what Keel's exporter sends) and keeps every span, flattened.
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";

type OtlpValue = {
  stringValue?: string;
  intValue?: string | number;
  boolValue?: boolean;
  doubleValue?: number;
};

export interface ReceivedSpan {
  name: string;
  traceId: string;
  spanId: string;
  parentSpanId: string;
  /** Attributes by key, as plain values (int values as numbers). */
  attributes: Record<string, string | number | boolean>;
  status: { code?: number; message?: string };
  startNs: bigint;
  endNs: bigint;
  /** The resource's attributes (service.name …). */
  resource: Record<string, string | number | boolean>;
}

export interface OtlpReceiver {
  /** The collector's base URL (the exporter adds `/v1/traces`). */
  baseUrl: string;
  spans: ReceivedSpan[];
  /** Requests that were not JSON on /v1/traces. */
  rejected: number;
  close(): Promise<void>;
}

function plain(attributes: Array<{ key: string; value: OtlpValue }> | undefined) {
  const out: Record<string, string | number | boolean> = {};
  for (const { key, value } of attributes ?? []) {
    if (value.stringValue !== undefined) out[key] = value.stringValue;
    else if (value.intValue !== undefined) out[key] = Number(value.intValue);
    else if (value.boolValue !== undefined) out[key] = value.boolValue;
    else if (value.doubleValue !== undefined) out[key] = value.doubleValue;
  }
  return out;
}

export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const receiver = { spans: [] as ReceivedSpan[], rejected: 0 };
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      const json = (req.headers["content-type"] ?? "").startsWith("application/json");
      if (req.method !== "POST" || req.url !== "/v1/traces" || !json) {
        receiver.rejected += 1;
        res.writeHead(req.url === "/v1/traces" ? 415 : 404).end();
        return;
      }
      const body = JSON.parse(Buffer.concat(chunks).toString("utf8"));
      for (const rs of body.resourceSpans ?? []) {
        const resource = plain(rs.resource?.attributes);
        for (const ss of rs.scopeSpans ?? []) {
          for (const span of ss.spans ?? []) {
            receiver.spans.push({
              name: span.name,
              traceId: span.traceId,
              spanId: span.spanId,
              parentSpanId: span.parentSpanId ?? "",
              attributes: plain(span.attributes),
              status: span.status ?? {},
              startNs: BigInt(span.startTimeUnixNano),
              endNs: BigInt(span.endTimeUnixNano),
              resource,
            });
          }
        }
      }
      res.writeHead(200, { "content-type": "application/json" }).end("{}");
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}`,
    get spans() {
      return receiver.spans;
    },
    get rejected() {
      return receiver.rejected;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
