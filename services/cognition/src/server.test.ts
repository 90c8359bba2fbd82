import { once } from "node:events";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { createLogger } from "@chaos-core/kit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { CapabilityContext } from "./capabilities/capability.js";
import { createMemoryPlanStore } from "./plans/memory-plan-store.js";
import { createDefaultCognitionDeps } from "./server.js";

/** A dependency this test must never reach: any use of it fails the test. */
const unused = (what: string) => new Proxy({}, { get: () => { throw new Error(`${what} must not be used`); } }) as never;

describe("the default deps: http.request and the operator's allowed ranges (CHAOS_CORE_HTTP_ALLOWED_ADDRESSES)", () => {
  const server = createServer((_req, res) => res.end("internal"));
  let port = 0;
  beforeAll(async () => {
    // Every interface, so localhost answers whether it resolves to 127.0.0.1, ::1 or both.
    server.listen(0);
    await once(server, "listening");
    port = (server.address() as AddressInfo).port;
  });
  afterAll(() => server.close());

  const fetchLocal = (httpAllowedAddresses?: string[]) => {
    const deps = createDefaultCognitionDeps({
      policy: unused("policy"),
      memory: unused("memory"),
      plans: createMemoryPlanStore(),
      logger: createLogger("test", "silent"),
      provider: { id: "heuristic", selection: "inferred" },
      ...(httpAllowedAddresses ? { httpAllowedAddresses } : {}),
    });
    const ctx: CapabilityContext = { call: { tenant: "acme", principal: "ann" }, signal: AbortSignal.timeout(10_000), provider: unused("provider"), memory: unused("memory"), policy: unused("policy") };
    // What the executor runs once policy allowed the host.
    return deps.registry.get("http.request")!.handler({ url: `http://localhost:${port}/` }, ctx) as Promise<{ status: number; body: string }>;
  };

  it("refuses a loopback address by default, and reaches it once the operator allows its range", async () => {
    await expect(fetchLocal()).rejects.toThrow(/"localhost" resolves to (127\.0\.0\.1|::1) \(loopback\); http\.request does not reach/);
    await expect(fetchLocal(["10.0.0.0/8"])).rejects.toThrow(/loopback/);
    expect(await fetchLocal(["127.0.0.1", "::1"])).toMatchObject({ status: 200, body: "internal" });
  });
});
