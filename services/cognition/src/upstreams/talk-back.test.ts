import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { parseUpstreamsFile } from "@chaos-core/kit";
import { recordingLogger } from "../../../../test/support/logger.js";
import type { UpstreamNotice } from "./notices.js";
import { noticeLine } from "./notices.js";
import { createUpstreamPool } from "./pool.js";

/** Who the calls are made for. */
const ACME = { tenant: "acme", principal: "agent" };

// A real upstream process (the SDK's server) that talks back during a call: progress, log lines,
// and requests for sampling, elicitation and roots that Chaos Core never declared it answers.
const ROOT = new URL("../../../../", import.meta.url).pathname;
const ASKING = join(ROOT, "test/support/upstreams/asking-server.mjs");
const [shared, own] = parseUpstreamsFile(
  JSON.stringify({
    upstreams: [
      { name: "asking", command: process.execPath, args: [ASKING], timeoutMs: 10_000 },
      { name: "mine", command: process.execPath, args: [ASKING], timeoutMs: 10_000, isolation: "tenant" },
    ],
  }),
  "test",
);

const { logger, lines } = recordingLogger();
const pool = createUpstreamPool({ connect: { secrets: { env: {} }, workDir: join(ROOT, ".cache", "talk-back-test-upstreams"), version: "test" }, logger });
afterAll(() => pool.close());

const text = (r: { content: Array<{ type: string; text?: string }> }) => r.content.map((c) => c.text ?? "").join("");

describe("an upstream that talks back during a call", () => {
  it.each([
    ["ask_model", "sampling/createMessage", "a model's completion"],
    ["ask_user", "elicitation/create", "input from a person"],
    ["list_roots", "roots/list", "its roots"],
  ])("answers its %s request (%s) with an error saying Chaos Core does not support it, logs it naming the upstream, and the upstream serves the next call", async (tool, method, what) => {
    const started = Date.now();
    const refused = await pool.call(shared!, ACME, tool, {});
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(refused.isError).toBe(true);
    expect(text(refused)).toBe(`refused (-32601): MCP error -32601: ${method} is not supported by Chaos Core: an upstream cannot ask it for ${what}${what === "its roots" ? " (the folders it may use)" : method === "sampling/createMessage" ? " (sampling)" : " (elicitation)"}`);
    expect(lines).toContainEqual(expect.objectContaining({ level: 40, upstream: "asking", method, msg: expect.stringContaining(`upstream "asking" sent ${method}`) as string }));
    expect(text(await pool.call(shared!, ACME, "echo", { text: "still serving" }))).toMatch(/^still serving \(pid \d+\)$/);
  });

  it("passes on every progress notification of the call, the last one included, and the log lines of a connection that is the tenant's own", async () => {
    const notices: UpstreamNotice[] = [];
    const result = await pool.call(own!, ACME, "steps", { count: 4 }, undefined, (n) => notices.push(n));
    expect(text(result)).toBe("4 steps done");
    expect(notices.filter((n) => n.kind === "progress")).toEqual([1, 2, 3, 4].map((i) => ({ kind: "progress", progress: i, total: 4, message: `copying item ${i}` })));
    expect(notices.filter((n) => n.kind === "log")).toEqual([1, 2, 3, 4].map((i) => ({ kind: "log", level: "info", data: `copied item ${i}` })));
    expect(notices.map((n) => noticeLine("mine", n)).slice(0, 2)).toEqual(["mine: 1/4 copying item 1", "mine: [info] copied item 1"]);
  });

  it("keeps a shared connection's log lines from any one call (another tenant's call could own them), and still passes on the call's progress", async () => {
    const notices: UpstreamNotice[] = [];
    await pool.call(shared!, ACME, "steps", { count: 2 }, undefined, (n) => notices.push(n));
    expect(notices.map((n) => n.kind)).toEqual(["progress", "progress"]);
  });

  it("gives each of two calls in flight its own progress, and neither a log line while the other is in flight", async () => {
    const a: UpstreamNotice[] = [];
    const b: UpstreamNotice[] = [];
    await Promise.all([
      pool.call(own!, ACME, "steps", { count: 3, ms: 30 }, undefined, (n) => a.push(n)),
      pool.call(own!, ACME, "steps", { count: 2, ms: 30 }, undefined, (n) => b.push(n)),
    ]);
    const progress = (ns: UpstreamNotice[]) => ns.flatMap((n) => (n.kind === "progress" ? [n.total] : []));
    expect(progress(a)).toEqual([3, 3, 3]);
    expect(progress(b)).toEqual([2, 2]);
    // b ran wholly while a was in flight; a was alone only for its last step.
    expect(b.filter((n) => n.kind === "log")).toEqual([]);
    expect(a.filter((n) => n.kind === "log").length).toBeLessThanOrEqual(1);
  });
});

describe("noticeLine", () => {
  it("names the upstream, flattens control characters and cuts a long text", () => {
    expect(noticeLine("files", { kind: "progress", progress: 7 })).toBe("files: 7");
    expect(noticeLine("files", { kind: "log", level: "warning", data: { path: "/a" } })).toBe('files: [warning] {"path":"/a"}');
    expect(noticeLine("files", { kind: "log", level: "info", data: "two\nlines\u001b[31m" })).toBe("files: [info] two lines [31m");
    const long = noticeLine("files", { kind: "progress", progress: 1, message: "x".repeat(1000) });
    expect(long).toBe(`files: ${"x".repeat(300)}…`);
  });
});
