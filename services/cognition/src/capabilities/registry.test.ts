import { z } from "zod";
import { describe, expect, it } from "vitest";
import { ChaosError, RESERVED_UPSTREAM_NAMES, type UpstreamGrant } from "@chaos-core/kit";
import { HeuristicProvider } from "../providers/heuristic.js";
import { defineCapability, type Capability } from "./capability.js";
import { BUILT_IN_CAPABILITIES } from "./index.js";
import { createCapabilityRegistry } from "./registry.js";

function named(name: string, description = `Test capability ${name}.`): Capability {
  return defineCapability({
    name,
    description,
    risk: "low",
    inputSchema: z.object({}),
    outputSchema: z.object({}),
    annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
    handler: () => Promise.resolve({}),
  });
}

function refusal(build: () => unknown): ChaosError {
  try {
    build();
  } catch (err) {
    expect(err).toBeInstanceOf(ChaosError);
    expect((err as ChaosError).code).toBe("invalid_argument");
    return err as ChaosError;
  }
  throw new Error("expected the registry to refuse the list");
}

describe("capability registry", () => {
  it("refuses a name registered twice, naming it", () => {
    const err = refusal(() => createCapabilityRegistry([named("memory.recall"), named("a.b"), named("memory.recall")]));
    expect(err.message).toContain('"memory.recall" is registered twice');
  });

  it.each(["", "Memory.recall", "memory..recall", "memory.", ".memory", "http.*", "1password.read", "memory-recall", "memory.recall "])(
    "refuses the malformed name %j",
    (name) => {
      expect(refusal(() => createCapabilityRegistry([named(name)])).message).toContain("is not valid");
    },
  );

  it("refuses a capability without a description", () => {
    expect(refusal(() => createCapabilityRegistry([named("a.b", "  ")])).message).toContain("no description");
  });

  it("resolves exact names only, in registration order", () => {
    const registry = createCapabilityRegistry([named("b.one"), named("a.two")]);
    expect(registry.list().map((c) => c.name)).toEqual(["b.one", "a.two"]);
    expect(registry.get("a.two")?.name).toBe("a.two");
    for (const near of ["a.tw", "A.two", "a.two ", "constructor", "__proto__", "toString"]) {
      expect(registry.get(near)).toBeUndefined();
    }
  });

  it("builds from the built-ins, whose descriptors carry no handler", () => {
    const registry = createCapabilityRegistry(BUILT_IN_CAPABILITIES);
    expect(registry.descriptors().map((d) => d.name)).toEqual(["cognition.generate_text", "memory.remember", "memory.recall", "memory.forget", "http.request"]);
    for (const d of registry.descriptors()) expect(Object.keys(d).sort()).toEqual(["annotations", "description", "name", "risk"]);
    expect(registry.get("memory.recall")?.annotations).toMatchObject({ readOnlyHint: true, openWorldHint: false });
    expect(registry.get("memory.remember")?.annotations).toMatchObject({ readOnlyHint: false, destructiveHint: true });
    // It sends the prompt to an outside model provider.
    expect(registry.get("cognition.generate_text")?.annotations.openWorldHint).toBe(true);
  });

  it("refuses an implies entry that is itself, unregistered, or implies others in turn", () => {
    const implying = (name: string, implies: string[]) => ({ ...named(name), implies });
    expect(refusal(() => createCapabilityRegistry([implying("a.b", ["a.b"])])).message).toContain('"a.b" implies itself');
    expect(refusal(() => createCapabilityRegistry([implying("a.b", ["c.d"])])).message).toContain('implies "c.d", which is not registered');
    expect(
      refusal(() => createCapabilityRegistry([named("e.f"), implying("c.d", ["e.f"]), implying("a.b", ["c.d"])])).message,
    ).toContain('"a.b" implies "c.d", which implies others in turn');
  });

  it("lists memory.episode, internal and implying memory.remember, but never offers it to planners", () => {
    const registry = createCapabilityRegistry(BUILT_IN_CAPABILITIES);
    expect(registry.get("memory.episode")).toMatchObject({ internal: true, implies: ["memory.remember"], risk: "low" });
    expect(registry.list().map((c) => c.name)).toContain("memory.episode");
    expect(registry.offered().map((c) => c.name)).not.toContain("memory.episode");
    expect(new HeuristicProvider().rank("record the episode of this run in memory", registry.descriptors(), 5).map((r) => r.name)).not.toContain(
      "memory.episode",
    );
  });

  it("feeds the heuristic ranking, which puts memory.recall first for a recall objective", () => {
    const registry = createCapabilityRegistry(BUILT_IN_CAPABILITIES);
    const ranked = new HeuristicProvider().rank("recall what I stored about the database", registry.descriptors(), 3);
    expect(ranked[0]?.name).toBe("memory.recall");
    expect(new HeuristicProvider().rank("remember that the deploy window is Friday", registry.descriptors(), 3)[0]?.name).toBe(
      "memory.remember",
    );
  });
});

describe("the names an upstream may not take", () => {
  it("include the prefix of every built-in capability, so no upstream tool can pose as one", () => {
    const prefixes = new Set(BUILT_IN_CAPABILITIES.map((c) => c.name.split(".")[0]!));
    for (const prefix of prefixes) expect(RESERVED_UPSTREAM_NAMES).toContain(prefix);
  });
});

describe("capability registry, as one caller sees it", () => {
  const upstreamTool = (name: string, grants: UpstreamGrant[]): Capability => ({
    ...named(name),
    upstream: { name: name.split(".")[0]!, tool: name.split(".")[1]!, mcpName: name.replace(".", "__"), title: "", inputSchema: { type: "object" }, grants },
  });
  const registry = createCapabilityRegistry([
    named("memory.recall"),
    upstreamTool("files.read", [{ tenants: ["acme"] }]),
    upstreamTool("files.write", [{ tenants: ["acme"], principals: ["alice"], as: "planner" }]),
    upstreamTool("tickets.refund", [{ tenants: ["acme"], roles: ["support"] }]),
  ]);

  it("leaves out of every list, and does not find, an upstream tool no rule offers the caller", () => {
    const bravo = registry.forCaller({ tenant: "bravo", principal: "bob" });
    expect(bravo.get("files.read")).toBeUndefined();
    expect(bravo.list().map((c) => c.name)).toEqual(["memory.recall"]);
    expect(bravo.offered().map((c) => c.name)).toEqual(["memory.recall"]);
    expect(bravo.descriptors().map((c) => c.name)).toEqual(["memory.recall"]);
    expect(bravo.upstreamTools()).toEqual([]);

    const bob = registry.forCaller({ tenant: "acme", principal: "bob" });
    expect(bob.offered().map((c) => c.name)).toEqual(["memory.recall", "files.read"]);
    expect(bob.get("files.write")).toBeUndefined();
    // Planner-only is still offered to the executor and the planners.
    const alice = bob.forCaller({ tenant: "acme", principal: "alice" });
    expect(alice.get("files.write")?.name).toBe("files.write");
    expect(alice.descriptors().map((c) => c.name)).toEqual(["memory.recall", "files.read", "files.write"]);
  });

  it("serves the upstream tools an approval re-pinned in place of the old ones, built-ins untouched, in views made before", () => {
    const replaced = createCapabilityRegistry([named("memory.recall"), upstreamTool("files.read", [{ tenants: ["acme"] }])]);
    const acme = replaced.forCaller({ tenant: "acme", principal: "bob" });
    const newer = { ...upstreamTool("files.read", [{ tenants: ["acme"] }]), description: "Reads a file (re-pinned)." };
    replaced.replaceUpstreamTools([newer, upstreamTool("files.stat", [{ tenants: ["acme"] }])]);
    expect(acme.get("files.read")?.description).toBe("Reads a file (re-pinned).");
    expect(acme.list().map((c) => c.name)).toEqual(["memory.recall", "files.read", "files.stat"]);
    // A set it could not be built with changes nothing.
    expect(refusal(() => replaced.replaceUpstreamTools([named("memory.recall")])).message).toMatch(/registered twice/);
    expect(replaced.list().map((c) => c.name)).toEqual(["memory.recall", "files.read", "files.stat"]);
  });

  it("offers a tool granted to a role only to a call whose context holds that role", () => {
    const sam = registry.forCaller({ tenant: "acme", principal: "sam", roles: ["approver", "support"] });
    expect(sam.get("tickets.refund")?.name).toBe("tickets.refund");
    expect(sam.offered().map((c) => c.name)).toContain("tickets.refund");
    for (const who of [{ tenant: "acme", principal: "sam" }, { tenant: "acme", principal: "sam", roles: ["approver"] }, { tenant: "bravo", principal: "sam", roles: ["support"] }]) {
      const view = registry.forCaller(who);
      expect(view.get("tickets.refund")).toBeUndefined();
      expect(view.descriptors().map((c) => c.name)).not.toContain("tickets.refund");
    }
  });
});
