import { spawn, type ChildProcess } from "node:child_process";
import { createServer, type AddressInfo } from "node:net";
import { networkInterfaces } from "node:os";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { ConfigError } from "../config.js";
import { telemetrySettings } from "./settings.js";

const ROOT = fileURLToPath(new URL("../../../../", import.meta.url));

/** A process that boots telemetry the way every service main does, then records one tool call and one MCP request. */
const SCRIPT = `
await import("@chaos-core/kit/telemetry");
const kit = await import("@chaos-core/kit");
kit.recordToolCall("chaoscore_recall", "ok", 12);
kit.startMcpServerSpan({ method: "tools/call", toolName: "chaoscore_recall", protocolVersion: "2025-11-25", transport: "pipe" }).end({ toolError: true });
console.log("ready");
setInterval(() => {}, 1000);
`;

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

const children: ChildProcess[] = [];
afterEach(() => {
  for (const c of children.splice(0)) c.kill("SIGKILL");
});

/** Starts the script; resolves with its stderr once it is ready, or rejects with it when it exits first. */
function boot(env: Record<string, string>): Promise<{ stderr: () => string }> {
  const clean = { ...process.env };
  for (const k of Object.keys(clean)) if (k.startsWith("OTEL_") || k.startsWith("CHAOS_CORE_METRICS_")) delete clean[k];
  // A secret on the command line (as `chaos-core migrate --database-url …` has one) must not be exported.
  const child = spawn(process.execPath, ["--input-type=module", "-e", SCRIPT, "--", "--database-url", "postgres://u:hunter2-secret@db/x"], { cwd: ROOT, env: { ...clean, ...env }, stdio: ["ignore", "pipe", "pipe"] });
  children.push(child);
  let err = "";
  child.stderr!.on("data", (d: Buffer) => (err += d.toString()));
  return new Promise((resolve, reject) => {
    child.stdout!.on("data", (d: Buffer) => {
      if (d.toString().includes("ready")) resolve({ stderr: () => err });
    });
    child.once("exit", (code) => reject(new Error(`exited with ${code}: ${err}`)));
  });
}

describe("the Prometheus scrape endpoint (CHAOS_CORE_METRICS_PROMETHEUS_PORT)", () => {
  it("serves the RED metrics and mcp.server.operation.duration on 127.0.0.1 by default, with no OTLP endpoint set", async () => {
    const port = await freePort();
    await boot({ CHAOS_CORE_METRICS_PROMETHEUS_PORT: String(port) });
    const res = await fetch(`http://127.0.0.1:${port}/metrics`);
    expect(res.status).toBe(200);
    const text = await res.text();
    expect(text).toMatch(/^target_info\{[^}]*process_pid=/m);
    expect(text).not.toContain("hunter2-secret");
    expect(text).not.toContain("process_command_args");
    expect(text).toMatch(/^chaoscore_tool_duration_count\{[^}]*chaoscore_tool="chaoscore_recall"[^}]*\} 1$/m);
    expect(text).toMatch(/chaoscore_outcome="ok"/);
    // Seconds, the conventions' buckets, error.type for an isError result.
    expect(text).toMatch(/^# UNIT mcp_server_operation_duration s$/m);
    const bucket = /^mcp_server_operation_duration_bucket\{([^}]*)\} (\d+)$/gm;
    const les = [...text.matchAll(bucket)].map((m) => /le="([^"]+)"/.exec(m[1]!)?.[1]);
    expect(les).toEqual(["0.01", "0.02", "0.05", "0.1", "0.2", "0.5", "1", "2", "5", "10", "30", "60", "120", "300", "+Inf"]);
    const count = /^mcp_server_operation_duration_count\{([^}]*)\} 1$/m.exec(text)?.[1] ?? "";
    expect(count).toContain('gen_ai_tool_name="chaoscore_recall"');
    expect(count).toContain('error_type="tool_error"');

    // Bound to loopback: another address of this machine does not answer.
    const other = Object.values(networkInterfaces())
      .flat()
      .find((a) => a && a.family === "IPv4" && !a.internal)?.address;
    if (other) await expect(fetch(`http://${other}:${port}/metrics`)).rejects.toThrow();
  });

  it("binds CHAOS_CORE_METRICS_PROMETHEUS_HOST when set (0.0.0.0 in a pod, for the ServiceMonitor)", async () => {
    const port = await freePort();
    await boot({ CHAOS_CORE_METRICS_PROMETHEUS_PORT: String(port), CHAOS_CORE_METRICS_PROMETHEUS_HOST: "0.0.0.0" });
    const other =
      Object.values(networkInterfaces())
        .flat()
        .find((a) => a && a.family === "IPv4" && !a.internal)?.address ?? "127.0.0.1";
    expect((await fetch(`http://${other}:${port}/metrics`)).status).toBe(200);
  });

  it("refuses to start when the port is taken, naming the variable", async () => {
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, "127.0.0.1", resolve));
    const { port } = taken.address() as AddressInfo;
    try {
      await expect(boot({ CHAOS_CORE_METRICS_PROMETHEUS_PORT: String(port) })).rejects.toThrow(
        new RegExp(`CHAOS_CORE_METRICS_PROMETHEUS_PORT=${port} .*cannot serve Prometheus metrics`),
      );
    } finally {
      await new Promise((resolve) => taken.close(resolve));
    }
  });

  it.each([["9464x"], ["0"], ["70000"], ["1.5"]])("refuses CHAOS_CORE_METRICS_PROMETHEUS_PORT=%s naming the variable", (value) => {
    expect(() => telemetrySettings({ CHAOS_CORE_METRICS_PROMETHEUS_PORT: value })).toThrow(ConfigError);
    expect(() => telemetrySettings({ CHAOS_CORE_METRICS_PROMETHEUS_PORT: value })).toThrow(/CHAOS_CORE_METRICS_PROMETHEUS_PORT: must be/);
  });

  it("starts nothing without an OTLP endpoint or a port, and nothing at all with OTEL_SDK_DISABLED=true", () => {
    expect(telemetrySettings({})).toEqual({ otlp: false });
    expect(telemetrySettings({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318" })).toEqual({ otlp: true });
    expect(telemetrySettings({ CHAOS_CORE_METRICS_PROMETHEUS_PORT: "9464" })).toEqual({ otlp: false, prometheus: { host: "127.0.0.1", port: 9464 } });
    expect(telemetrySettings({ OTEL_SDK_DISABLED: "true", OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318", CHAOS_CORE_METRICS_PROMETHEUS_PORT: "9464" })).toEqual({ otlp: false });
  });
});
