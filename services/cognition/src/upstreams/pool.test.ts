import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { ChaosError, parseUpstreamsFile } from "@chaos-core/kit";
import { createLogger } from "@chaos-core/kit";
import { createUpstreamPool } from "./pool.js";

/** Who the calls are made for. */
const ACME = { tenant: "acme", principal: "agent" };

// Real upstream processes: a server that misbehaves on request, and server-everything beside it.
const ROOT = new URL("../../../../", import.meta.url).pathname;
const TROUBLE = join(ROOT, "test/support/upstreams/trouble-server.mjs");
const EVERYTHING = join(ROOT, "node_modules/@modelcontextprotocol/server-everything/dist/index.js");
const [trouble, everything] = parseUpstreamsFile(
  JSON.stringify({
    upstreams: [
      { name: "trouble", command: process.execPath, args: [TROUBLE], timeoutMs: 500 },
      { name: "everything", command: process.execPath, args: [EVERYTHING, "stdio"] },
    ],
  }),
  "test",
);

let clock = Date.now();
const pool = createUpstreamPool({
  connect: { secrets: { env: {} }, workDir: join(ROOT, ".cache", "pool-test-upstreams"), version: "test" },
  logger: createLogger("pool-test", "error"),
  breaker: { failures: 3, openMs: 10_000 },
  maxResultBytes: 1024 * 1024,
  now: () => clock,
});
afterAll(() => pool.close());

const text = (r: { content: Array<{ type: string; text?: string }> }) => r.content.map((c) => c.text ?? "").join("");
async function refusal(p: Promise<unknown>): Promise<ChaosError> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(ChaosError);
    return err as ChaosError;
  }
  throw new Error("the call succeeded");
}

describe("an upstream's trouble stays its own", () => {
  it("names a hung upstream, opens its breaker after repeated failures, and closes it after a probe succeeds, while another upstream serves throughout", async () => {
    for (let i = 0; i < 3; i++) {
      const e = await refusal(pool.call(trouble!, ACME, "hang", {}));
      expect(e.code).toBe("deadline_exceeded");
      expect(e.message).toBe('upstream "trouble" did not answer within 500 ms');
      expect(text(await pool.call(everything!, ACME, "echo", { message: `still here ${i}` }))).toContain(`still here ${i}`);
    }
    const open = await refusal(pool.call(trouble!, ACME, "ok", {}));
    expect(open.code).toBe("unavailable");
    expect(open.message).toMatch(/^upstream "trouble" failed 3 times in a row; its breaker is open until /);
    expect(pool.breakers()).toEqual(expect.arrayContaining([expect.objectContaining({ upstream: "trouble", state: "open", consecutiveFailures: 3 }), expect.objectContaining({ upstream: "everything", state: "closed" })]));
    clock += 10_001;
    expect(pool.breakers()).toEqual(expect.arrayContaining([expect.objectContaining({ upstream: "trouble", state: "half-open" })]));
    expect(text(await pool.call(trouble!, ACME, "ok", {}))).toMatch(/^pid \d+$/);
    expect(pool.breakers()).toEqual(expect.arrayContaining([expect.objectContaining({ upstream: "trouble", state: "closed", consecutiveFailures: 0 })]));
  });

  it("cuts a stdio answer over the size cap while it arrives, naming the upstream and the cap; a failure of that upstream; the next call starts it again", async () => {
    const before = text(await pool.call(trouble!, ACME, "ok", {}));
    // 2 MB: past the cap and its framing allowance (128 KiB), the reader stops and the connection closes.
    const e = await refusal(pool.call(trouble!, ACME, "huge", { mb: 2 }));
    expect(e.code).toBe("resource_exhausted");
    expect(e.message).toBe('upstream "trouble" sent an answer over 1048576 bytes, the most Chaos Core accepts (CHAOS_CORE_UPSTREAM_MAX_RESULT_BYTES)');
    expect(pool.breakers().find((b) => b.upstream === "trouble")).toMatchObject({ state: "closed", consecutiveFailures: 1 });
    const after = text(await pool.call(trouble!, ACME, "ok", {}));
    expect(after).toMatch(/^pid \d+$/);
    expect(after).not.toBe(before);
  });

  it("refuses an answer over the cap but within its framing allowance once whole, the same way, keeping the connection", async () => {
    const before = text(await pool.call(trouble!, ACME, "ok", {}));
    // 1.05 MiB of text: its message passes the reader (cap + 128 KiB), its result not the cap.
    const e = await refusal(pool.call(trouble!, ACME, "huge", { mb: 1.05 }));
    expect(e.code).toBe("resource_exhausted");
    expect(e.message).toBe('upstream "trouble" sent an answer over 1048576 bytes, the most Chaos Core accepts (CHAOS_CORE_UPSTREAM_MAX_RESULT_BYTES)');
    expect(pool.breakers().find((b) => b.upstream === "trouble")).toMatchObject({ consecutiveFailures: 1 });
    expect(text(await pool.call(trouble!, ACME, "ok", {}))).toBe(before);
  });

  it("names an upstream that died mid-call, and starts it again on the next call", async () => {
    const before = text(await pool.call(trouble!, ACME, "ok", {}));
    const e = await refusal(pool.call(trouble!, ACME, "crash", {}));
    expect(e.code).toBe("unavailable");
    expect(e.message).toMatch(/^upstream "trouble" failed: /);
    const after = text(await pool.call(trouble!, ACME, "ok", {}));
    expect(after).toMatch(/^pid \d+$/);
    expect(after).not.toBe(before);
  });

  it("passes the caller's cancellation on", async () => {
    const controller = new AbortController();
    const call = pool.call(trouble!, ACME, "slow", { ms: 5_000 }, controller.signal);
    setTimeout(() => controller.abort(), 100);
    expect((await refusal(call)).code).toBe("cancelled");
  });
});
