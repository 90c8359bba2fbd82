import { create } from "@bufbuild/protobuf";
import { createLogger } from "@chaos-core/kit";
import { CapabilitySchema, ListCapabilitiesResponseSchema, type Capability } from "@chaos-core/proto/gen/chaoscore/cognition/v1/cognition_pb.js";
import { describe, expect, it } from "vitest";
import type { CognitionClient } from "./service-clients.js";
import { createUpstreamCatalog, TENANT_CHANGE_SETTLE_MS } from "./upstream-catalog.js";

const logger = createLogger("catalog-test", "silent");

/** `tenant`'s own upstream tool, as cognition answers it in that tenant's context. */
const own = (tenant: string, name: string): Capability =>
  create(CapabilitySchema, { name, upstream: { upstream: "everything", tool: name, mcpName: name.replace(".", "__"), grants: [{ tenants: [tenant], principals: [], as: "tools" }] } });

/**
 * Cognition's ListCapabilities and nothing else (what the catalog calls): answers each tenant's
 * `served` tools, counts the reads, and holds a read while `hold` is set.
 */
function cognitionAnswering(served: Map<string, Capability[]>) {
  const reads: string[] = [];
  let hold: Promise<void> | undefined;
  const client = {
    async listCapabilities(_req: unknown, opts: { ctx: { tenant: string } }) {
      reads.push(opts.ctx.tenant);
      const answer = [...(served.get(opts.ctx.tenant) ?? [])];
      await hold;
      return create(ListCapabilitiesResponseSchema, { capabilities: answer });
    },
  } as unknown as CognitionClient;
  return {
    client,
    reads,
    holdUntil(released: Promise<void>) {
      hold = released;
    },
  };
}

const settled = () => new Promise((r) => setTimeout(r, TENANT_CHANGE_SETTLE_MS * 3));

describe("the upstream catalog told that a tenant changed", () => {
  it("reads the tenant's own tools again once for a burst, and tells the change; a tenant never read here is not read", async () => {
    const served = new Map([["acme", [own("acme", "everything.echo")]]]);
    const cognition = cognitionAnswering(served);
    const catalog = createUpstreamCatalog(cognition.client, logger);
    const changes: Array<string | undefined> = [];
    catalog.onChange((_change, tenant) => changes.push(tenant));
    await catalog.refreshTenant!("acme");
    expect(cognition.reads).toEqual(["acme"]);

    served.set("acme", []);
    for (let i = 0; i < 5; i++) catalog.tenantChanged!("acme");
    catalog.tenantChanged!("zed");
    await settled();
    expect(cognition.reads).toEqual(["acme", "acme"]);
    expect(changes).toEqual(["acme", "acme"]);
    expect(catalog.capabilities("acme").map((c) => c.name)).toEqual([]);
  });

  it("reads once more after a read that was under way when the change was told (it may have read before the change)", async () => {
    const served = new Map([["acme", [own("acme", "everything.echo")]]]);
    const cognition = cognitionAnswering(served);
    const catalog = createUpstreamCatalog(cognition.client, logger);
    await catalog.refreshTenant!("acme");

    let release!: () => void;
    cognition.holdUntil(new Promise<void>((r) => (release = r)));
    const reading = catalog.refreshTenant!("acme");
    // The change commits after that read answered: only a read after it sees it.
    served.set("acme", []);
    catalog.tenantChanged!("acme");
    await settled();
    expect(cognition.reads).toEqual(["acme", "acme"]);
    cognition.holdUntil(Promise.resolve());
    release();
    await reading;
    await settled();
    expect(cognition.reads).toEqual(["acme", "acme", "acme"]);
    expect(catalog.capabilities("acme").map((c) => c.name)).toEqual([]);
  });
});
