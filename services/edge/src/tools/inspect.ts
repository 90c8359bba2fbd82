import { z } from "zod";
import type { ListCapabilitiesResponse } from "@chaos-core/proto/gen/chaoscore/cognition/v1/cognition_pb.js";
import { inspectPolicy, policyOutput } from "./inspect-policy.js";
import { defineTool, type ToolContext } from "../definitions/tool.js";
import { isoTime } from "../clients/timestamps.js";

const SUBJECTS = ["policy", "memory", "sessions", "capabilities", "providers", "audit", "upstreams"] as const;


const memoryOutput = z.object({
  items: z.number(),
  expired: z.number(),
  value_bytes: z.number(),
  oldest_update: z.string().optional(),
  newest_update: z.string().optional(),
  top_tags: z.array(z.object({ tag: z.string(), count: z.number() })),
});

const sessionOutput = z.object({
  id: z.string(),
  tenant: z.string(),
  principal: z.string(),
  transport: z.string(),
  protocol_version: z.string(),
  client_info: z.record(z.string(), z.unknown()),
  client_capabilities: z.record(z.string(), z.unknown()),
  created_at: z.string(),
  last_seen_at: z.string(),
  log_level: z.string().optional(),
  idle_ttl_seconds: z.number(),
});

const requestOutput = z.object({
  request_ref: z.string().describe("This request's ref (128 random bits); the audit ledger records it as request:<ref>"),
  protocol_version: z.string(),
  client_info: z.record(z.string(), z.unknown()),
  client_capabilities: z.record(z.string(), z.unknown()).describe("What this request's envelope declared (nothing carries over between requests)"),
  log_level: z.string().optional().describe("The level this request asked log notifications at; none are sent without one"),
});

const capabilityOutput = z.object({
  name: z.string(),
  description: z.string(),
  risk: z.string().describe("low, medium, high or critical: what policy evaluates the capability at"),
  annotations: z.object({
    read_only_hint: z.boolean(),
    destructive_hint: z.boolean(),
    idempotent_hint: z.boolean(),
    open_world_hint: z.boolean(),
  }),
  input_schema: z.record(z.string(), z.unknown()).optional().describe("JSON Schema of the input, when published"),
  internal: z.boolean().optional().describe("True for the core's own bookkeeping (memory.episode): never planned, refused as a step"),
  implies: z.array(z.string()).optional().describe("Capabilities whose policy also governs this one; the strictest decision holds"),
});

const providerOutput = z.object({
  id: z.string(),
  display_name: z.string(),
  model: z.string().describe('"none" when the provider uses no model'),
  configured: z.boolean(),
});

const auditOutput = z.object({
  entries: z.number().describe("Entries in the tenant's audit log"),
  chain_ok: z.boolean().describe("Whether every content hash, chain link and signed checkpoint verified"),
  first_bad_seq: z.number().optional().describe("The first entry that does not verify, when one does not"),
  problem: z.string().optional(),
  checkpoint: z
    .object({ size: z.number(), root_hash: z.string(), verifier_key: z.string() })
    .optional()
    .describe("The latest signed checkpoint (C2SP tlog-checkpoint) and the key that verifies it"),
  recent: z
    .array(z.object({ seq: z.number(), ts: z.string(), principal: z.string(), type: z.string() }))
    .describe("The newest entries (most recent first); inspect_audit_ledger shows them whole"),
});

const upstreamOutput = z.object({
  name: z.string(),
  transport: z.string().describe("http (Streamable HTTP) or stdio"),
  tools_served: z.number().describe("Its pinned tools served now (to you: those you are offered)"),
  tools_quarantined: z.number().describe("Its tools held back because they changed since they were pinned"),
  breakers: z
    .array(
      z.object({
        scope: z.string().describe("shared, or the tenant of a per-tenant connection"),
        state: z.enum(["closed", "open", "half-open"]),
        consecutive_failures: z.number(),
        retry_at: z.string().optional().describe("While open: when the next call may try it again"),
      }),
    )
    .max(2)
    .describe("The shared connection's and your tenant's own, once opened (none before the first call); open: its calls fail at once, naming it"),
});

const output = z.object({
  what: z.enum(SUBJECTS),
  available: z.boolean(),
  reason: z.string().optional(),
  policy: policyOutput.optional(),
  memory: memoryOutput.optional(),
  session: sessionOutput.optional(),
  request: requestOutput.optional().describe("2026-07-28, which has no session: what this request carried"),
  capabilities: z.array(capabilityOutput).optional().describe("Those plans may use, and internal ones flagged"),
  provider: providerOutput.optional(),
  audit: auditOutput.optional(),
  upstreams: z.array(upstreamOutput).max(256).optional().describe("The upstream MCP servers whose tools you are offered, and their circuit breakers"),
});

type InspectOutput = z.output<typeof output>;

async function inspectMemory(ctx: ToolContext): Promise<InspectOutput> {
  const s = await ctx.deps.memory.stats({}, { ctx: ctx.call, signal: ctx.signal });
  const oldest = isoTime(s.oldestUpdate);
  const newest = isoTime(s.newestUpdate);
  return {
    what: "memory",
    available: true,
    memory: {
      items: Number(s.items),
      expired: Number(s.expired),
      value_bytes: Number(s.valueBytes),
      ...(oldest ? { oldest_update: oldest } : {}),
      ...(newest ? { newest_update: newest } : {}),
      top_tags: s.topTags.map((t) => ({ tag: t.tag, count: Number(t.count) })),
    },
  };
}

async function inspectSession(ctx: ToolContext): Promise<InspectOutput> {
  if (ctx.modern) {
    // 2026-07-28 has no sessions: each request stands alone, and says who it is in its envelope.
    const m = ctx.modern;
    return {
      what: "sessions",
      available: true,
      request: {
        request_ref: m.requestRef,
        protocol_version: m.protocolVersion,
        client_info: m.clientInfo,
        client_capabilities: m.clientCapabilities,
        ...(m.logLevel ? { log_level: m.logLevel } : {}),
      },
    };
  }
  const id = ctx.call.sessionId;
  // Only the caller's own session, looked up under the caller's own tenant: never a list.
  const record = id ? await ctx.deps.sessions.get(ctx.call.tenant, id) : undefined;
  if (!record || record.principal !== ctx.call.principal) {
    return { what: "sessions", available: false, reason: "this session has no stored metadata (it may have expired)" };
  }
  return {
    what: "sessions",
    available: true,
    session: {
      id: record.id,
      tenant: record.tenant,
      principal: record.principal,
      transport: record.transport,
      protocol_version: record.protocolVersion,
      client_info: { ...record.clientInfo },
      client_capabilities: { ...record.clientCapabilities },
      created_at: record.createdAt,
      last_seen_at: record.lastSeenAt,
      ...(record.logLevel ? { log_level: record.logLevel } : {}),
      idle_ttl_seconds: ctx.deps.sessions.ttlSeconds,
    },
  };
}

async function inspectCapabilities(ctx: ToolContext): Promise<InspectOutput> {
  const res = await ctx.deps.cognition.listCapabilities({}, { ctx: ctx.call, signal: ctx.signal });
  return { what: "capabilities", available: true, capabilities: capabilitiesView(res) };
}

/** The capability registry as `what=capabilities` and the `chaoscore://capabilities` resource show it. */
export function capabilitiesView(res: ListCapabilitiesResponse) {
  return res.capabilities.map((c) => ({
      name: c.name,
      description: c.description,
      risk: c.risk,
      annotations: {
        read_only_hint: c.annotations?.readOnlyHint ?? false,
        destructive_hint: c.annotations?.destructiveHint ?? false,
        idempotent_hint: c.annotations?.idempotentHint ?? false,
        open_world_hint: c.annotations?.openWorldHint ?? false,
      },
      ...(c.inputSchema && Object.keys(c.inputSchema).length > 0 ? { input_schema: c.inputSchema } : {}),
      ...(c.internal ? { internal: true } : {}),
      ...(c.implies.length > 0 ? { implies: [...c.implies] } : {}),
  }));
}

async function inspectProviders(ctx: ToolContext): Promise<InspectOutput> {
  const res = await ctx.deps.cognition.describeProvider({}, { ctx: ctx.call, signal: ctx.signal });
  return {
    what: "providers",
    available: true,
    provider: { id: res.id, display_name: res.displayName, model: res.model || "none", configured: res.configured },
  };
}

async function inspectAudit(ctx: ToolContext): Promise<InspectOutput> {
  const ledger = ctx.deps.ledger;
  if (!ledger) return { what: "audit", available: false, reason: "no ledger is configured for this edge (LEDGER_ADDR)" };
  const opts = { ctx: ctx.call, signal: ctx.signal };
  const [chain, checkpoint, recent] = await Promise.all([
    ledger.verifyChain({}, opts),
    ledger.getCheckpoint({}, opts),
    ledger.listEntries({ limit: 10, newestFirst: true }, opts),
  ]);
  const cp = checkpoint.checkpoint;
  return {
    what: "audit",
    available: true,
    audit: {
      entries: Number(chain.entries),
      chain_ok: chain.ok,
      ...(chain.ok ? {} : { first_bad_seq: Number(chain.firstBadSeq), problem: chain.problem }),
      ...(cp ? { checkpoint: { size: Number(cp.size), root_hash: cp.rootHash, verifier_key: cp.verifierKey } } : {}),
      recent: recent.entries.map((e) => ({
        seq: Number(e.seq),
        ts: e.ts,
        principal: e.principal,
        type: typeof e.event?.type === "string" ? e.event.type : "",
      })),
    },
  };
}

async function inspectUpstreams(ctx: ToolContext): Promise<InspectOutput> {
  const res = await ctx.deps.cognition.listUpstreams({}, { ctx: ctx.call, signal: ctx.signal });
  return {
    what: "upstreams",
    available: true,
    upstreams: res.upstreams.map((u) => ({
      name: u.name,
      transport: u.transport,
      tools_served: u.toolsServed,
      tools_quarantined: u.toolsQuarantined,
      breakers: u.breakers.map((b) => ({
        scope: b.scope,
        state: b.state === "open" || b.state === "half-open" ? b.state : "closed",
        consecutive_failures: b.consecutiveFailures,
        ...(b.retryAt ? { retry_at: b.retryAt } : {}),
      })),
    })),
  };
}

/** `chaoscore_inspect`: live views of the control plane, and plain words for what is not there yet. */
export const inspectTool = defineTool({
  name: "chaoscore_inspect",
  toolset: "core",
  title: "Inspect",
  description:
    "Look at the live control plane: `policy` (the tenant's policy document and version, approval channels " +
    "included; with `capability`, the decision for it and who may approve it; with `spend_policy` (and `tool`), who " +
    "may approve such a spend), `memory` (statistics), `sessions` (this session's metadata; on 2026-07-28 this " +
    "request's), `capabilities` (the registered ones, with risk and hints), `providers` (the active AI provider and " +
    "model, never a secret), `audit` (the audit ledger: size, chain verification, latest signed checkpoint, newest " +
    "entries), `upstreams` (the upstream MCP servers whose tools you are offered, and their circuit breakers).",
  input: z
    .object({
      what: z.enum(SUBJECTS),
      capability: z.string().min(1).max(256).optional().describe("With what=policy: a capability to evaluate"),
      arguments: z
        .record(z.string(), z.unknown())
        .optional()
        .describe("With capability: the call's arguments, for the policy's rules' conditions (nothing runs)"),
      spend_policy: z
        .string()
        .regex(/^[a-z][a-z0-9_-]{0,62}$/, "must be a spend policy name such as equity, wire or rebalance")
        .optional()
        .describe("With what=policy: a spend policy (equity, wire, …)"),
      tool: z
        .string()
        .regex(/^[a-z][a-z0-9_]*$/, "must be a finance tool name such as wire_treasury_transfer")
        .max(64)
        .optional()
        .describe("With spend_policy: the finance tool that asks, whose own entry comes first"),
    })
    .superRefine((args, issue) => {
      for (const field of ["capability", "spend_policy"] as const) {
        if (args[field] !== undefined && args.what !== "policy") {
          issue.addIssue({ code: "custom", path: [field], message: `${field} is only used with what=policy` });
        }
      }
      if (args.arguments !== undefined && args.capability === undefined) {
        issue.addIssue({ code: "custom", path: ["arguments"], message: "arguments is only used with capability" });
      }
      if (args.tool !== undefined && args.spend_policy === undefined) {
        issue.addIssue({ code: "custom", path: ["tool"], message: "tool is only used with spend_policy" });
      }
    }),
  output,
  annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  async run(args, ctx) {
    switch (args.what) {
      case "policy":
        return {
          what: "policy" as const,
          available: true,
          policy: await inspectPolicy(ctx, args.capability, args.arguments, args.spend_policy ? { policy: args.spend_policy, tool: args.tool } : undefined),
        };
      case "memory":
        return inspectMemory(ctx);
      case "sessions":
        return inspectSession(ctx);
      case "capabilities":
        return inspectCapabilities(ctx);
      case "providers":
        return inspectProviders(ctx);
      case "audit":
        return inspectAudit(ctx);
      case "upstreams":
        return inspectUpstreams(ctx);
    }
  },
});
