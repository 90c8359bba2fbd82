/**
 * A local OpenTelemetry collector for tests: an HTTP server that takes OTLP/HTTP JSON exports
 * (`OTEL_EXPORTER_OTLP_PROTOCOL=http/json`) on `/v1/traces`, `/v1/metrics` and `/v1/logs` and
 * decodes them into flat spans, metric points and log records, each with the `service.name` of the
 * process that sent it.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";

export type AttrValue = string | number | boolean | undefined;

/** One received span; ids are lowercase hex, as OTLP/JSON carries them. */
export interface ReceivedSpan {
  readonly service: string;
  readonly traceId: string;
  readonly spanId: string;
  /** Empty for a root span. */
  readonly parentSpanId: string;
  readonly name: string;
  /** OTLP's SpanKind number: 1 internal, 2 server, 3 client. */
  readonly kind: number;
  /** OTLP's status code: 0 unset, 1 ok, 2 error. */
  readonly status: number;
  readonly attributes: Readonly<Record<string, AttrValue>>;
  /** Start and end, in milliseconds since the epoch (from OTLP's nanoseconds). */
  readonly startMs: number;
  readonly endMs: number;
}

/** One received histogram data point. */
export interface ReceivedHistogramPoint {
  readonly service: string;
  readonly metric: string;
  readonly unit: string;
  readonly explicitBounds: readonly number[];
  readonly count: number;
  readonly attributes: Readonly<Record<string, AttrValue>>;
}

export interface ReceivedGaugePoint {
  readonly service: string;
  readonly metric: string;
  readonly value: number;
  readonly attributes: Readonly<Record<string, AttrValue>>;
}

/** One received log record. */
export interface ReceivedLogRecord {
  readonly service: string;
  readonly eventName: string;
  readonly severityText: string;
  readonly body: string;
  readonly attributes: Readonly<Record<string, AttrValue>>;
  /** The whole record as it arrived (OTLP/JSON), for a search of everything it carries. */
  readonly raw: string;
}

export interface OtlpReceiver {
  /** The base URL to give as OTEL_EXPORTER_OTLP_ENDPOINT. */
  readonly url: string;
  readonly spans: ReceivedSpan[];
  readonly histograms: ReceivedHistogramPoint[];
  readonly gauges: ReceivedGaugePoint[];
  readonly logs: ReceivedLogRecord[];
  /** Bodies that did not decode, kept so a test can say why nothing arrived. */
  readonly rejected: string[];
  close(): Promise<void>;
}

interface OtlpKeyValue {
  key: string;
  value?: { stringValue?: string; intValue?: string | number; doubleValue?: number; boolValue?: boolean };
}

function attrs(list: OtlpKeyValue[] | undefined): Record<string, AttrValue> {
  const out: Record<string, AttrValue> = {};
  for (const { key, value } of list ?? []) {
    const v = value ?? {};
    out[key] = v.stringValue ?? (v.intValue !== undefined ? Number(v.intValue) : undefined) ?? v.doubleValue ?? v.boolValue;
  }
  return out;
}

interface TracesBody {
  resourceSpans?: Array<{
    resource?: { attributes?: OtlpKeyValue[] };
    scopeSpans?: Array<{
      spans?: Array<{
        traceId: string;
        spanId: string;
        parentSpanId?: string;
        name: string;
        kind?: number;
        status?: { code?: number };
        attributes?: OtlpKeyValue[];
        startTimeUnixNano?: string | number;
        endTimeUnixNano?: string | number;
      }>;
    }>;
  }>;
}

/** OTLP/JSON nanoseconds (a decimal string) as milliseconds. */
const nanosToMs = (n: string | number | undefined) => (n === undefined ? 0 : Number(BigInt(n) / 1000n) / 1000);

interface MetricsBody {
  resourceMetrics?: Array<{
    resource?: { attributes?: OtlpKeyValue[] };
    scopeMetrics?: Array<{
      metrics?: Array<{
        name: string;
        unit?: string;
        histogram?: { dataPoints?: Array<{ attributes?: OtlpKeyValue[]; explicitBounds?: number[]; count?: string | number }> };
        gauge?: { dataPoints?: Array<{ attributes?: OtlpKeyValue[]; asDouble?: number; asInt?: string | number }> };
      }>;
    }>;
  }>;
}

interface LogsBody {
  resourceLogs?: Array<{
    resource?: { attributes?: OtlpKeyValue[] };
    scopeLogs?: Array<{
      logRecords?: Array<{ eventName?: string; severityText?: string; body?: { stringValue?: string }; attributes?: OtlpKeyValue[] }>;
    }>;
  }>;
}

function serviceOf(resource: { attributes?: OtlpKeyValue[] } | undefined): string {
  return String(attrs(resource?.attributes)["service.name"] ?? "");
}

/** Starts the receiver on an ephemeral loopback port. */
export function startOtlpReceiver(): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  const histograms: ReceivedHistogramPoint[] = [];
  const gauges: ReceivedGaugePoint[] = [];
  const received: ReceivedLogRecord[] = [];
  const rejected: string[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const text = Buffer.concat(chunks).toString("utf8");
      try {
        if (req.url === "/v1/traces") {
          for (const rs of (JSON.parse(text) as TracesBody).resourceSpans ?? []) {
            const service = serviceOf(rs.resource);
            for (const ss of rs.scopeSpans ?? []) {
              for (const s of ss.spans ?? []) {
                spans.push({
                  service,
                  traceId: s.traceId,
                  spanId: s.spanId,
                  parentSpanId: s.parentSpanId ?? "",
                  name: s.name,
                  kind: s.kind ?? 0,
                  status: s.status?.code ?? 0,
                  attributes: attrs(s.attributes),
                  startMs: nanosToMs(s.startTimeUnixNano),
                  endMs: nanosToMs(s.endTimeUnixNano),
                });
              }
            }
          }
        } else if (req.url === "/v1/logs") {
          for (const rl of (JSON.parse(text) as LogsBody).resourceLogs ?? []) {
            const service = serviceOf(rl.resource);
            for (const sl of rl.scopeLogs ?? []) {
              for (const r of sl.logRecords ?? []) {
                received.push({
                  service,
                  eventName: r.eventName ?? "",
                  severityText: r.severityText ?? "",
                  body: r.body?.stringValue ?? "",
                  attributes: attrs(r.attributes),
                  raw: JSON.stringify(r),
                });
              }
            }
          }
        } else if (req.url === "/v1/metrics") {
          for (const rm of (JSON.parse(text) as MetricsBody).resourceMetrics ?? []) {
            const service = serviceOf(rm.resource);
            for (const sm of rm.scopeMetrics ?? []) {
              for (const m of sm.metrics ?? []) {
                for (const p of m.histogram?.dataPoints ?? []) {
                  histograms.push({
                    service,
                    metric: m.name,
                    unit: m.unit ?? "",
                    explicitBounds: p.explicitBounds ?? [],
                    count: Number(p.count ?? 0),
                    attributes: attrs(p.attributes),
                  });
                }
                for (const p of m.gauge?.dataPoints ?? []) {
                  gauges.push({ service, metric: m.name, value: Number(p.asDouble ?? p.asInt ?? NaN), attributes: attrs(p.attributes) });
                }
              }
            }
          }
        }
      } catch (err) {
        rejected.push(`${req.url} (${req.headers["content-type"]}): ${(err as Error).message}`);
        res.writeHead(400).end();
        return;
      }
      res.writeHead(200, { "content-type": "application/json" }).end("{}");
    });
  });
  return new Promise((resolve) =>
    server.listen(0, "127.0.0.1", () =>
      resolve({
        url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
        spans,
        histograms,
        gauges,
        logs: received,
        rejected,
        close: () => new Promise((done) => server.close(() => done())),
      }),
    ),
  );
}
