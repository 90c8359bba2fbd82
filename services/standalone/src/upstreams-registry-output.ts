import { timestampDate, type Timestamp } from "@bufbuild/protobuf/wkt";
import type { JsonObject } from "@bufbuild/protobuf";
import { parseLock } from "@chaos-core/contracts";
import { upstreamRisk, upstreamToolNames } from "@chaos-core/cognition";
import { ChaosError, describeSecretRef, type CallContext, type SecretRef, type ServiceClient } from "@chaos-core/kit";
import { UpstreamStatus, type TenantUpstream } from "@chaos-core/proto/gen/chaoscore/admin/v1/admin_pb.js";
import type { LedgerService } from "@chaos-core/proto/gen/chaoscore/ledger/v1/ledger_pb.js";

// A tenant's registry upstreams as `chaos-core upstreams … --tenant` prints and ledgers them.

const STATUS: Record<number, string> = { [UpstreamStatus.ENABLED]: "enabled", [UpstreamStatus.DISABLED]: "disabled" };
const iso = (t: Timestamp | undefined) => (t ? timestampDate(t).toISOString() : null);

/** Headers as the references they are (`$CHAOS_CORE_UPSTREAM_SECRET_GH`, `file gh-token`): the registry holds no value. */
function headerRefs(declaration: JsonObject | undefined): Record<string, string> {
  const headers = (declaration?.headers ?? {}) as Record<string, SecretRef>;
  return Object.fromEntries(Object.entries(headers).map(([name, ref]) => [name, `${ref.prefix ? JSON.stringify(ref.prefix) + " + " : ""}${describeSecretRef(ref)}`]));
}

/** An upstream as `--json` prints it. */
export function upstreamJson(u: TenantUpstream) {
  return {
    tenant: u.tenant,
    name: u.name,
    status: STATUS[u.status] ?? "unknown",
    declaration: u.declaration ?? {},
    pinned_tools: u.pinnedTools,
    created_at: iso(u.createdAt),
    updated_at: iso(u.updatedAt),
    pinned_at: iso(u.pinnedAt),
  };
}

/** One line of `upstreams list --tenant`. */
export function upstreamLine(u: TenantUpstream): string {
  const url = typeof u.declaration?.url === "string" ? u.declaration.url : "";
  return `${u.name}\t${url}\t${STATUS[u.status] ?? "unknown"}\tpinned, ${u.pinnedTools} tools\n`;
}

/** The pinned tools with the names and risk Chaos Core would serve them under. */
export function pinnedToolsOf(u: TenantUpstream, pin: string) {
  const contracts = parseLock(pin).contracts;
  const d = u.declaration ?? {};
  const decl = {
    name: u.name,
    transport: "http" as const,
    url: String(d.url ?? ""),
    headers: {},
    timeoutMs: Number(d.timeoutMs ?? 30_000),
    ...(d.risk ? { risk: d.risk as never } : {}),
    trustAnnotations: d.trustAnnotations !== false,
    disabled: false,
  };
  return upstreamToolNames(u.name, Object.keys(contracts.tools)).map((n) => ({
    tool: n.tool,
    capability: n.capability,
    mcp_name: n.mcpName,
    risk: upstreamRisk(decl, n.tool, contracts.tools[n.tool]!.behavior),
  }));
}

/** `upstreams show --tenant` as text: the declaration (headers as references), then each pinned tool. */
export function upstreamShown(u: TenantUpstream, pin: string): string {
  const tools = pinnedToolsOf(u, pin);
  const d = { ...(u.declaration ?? {}), headers: headerRefs(u.declaration) };
  return `${upstreamLine(u)}${JSON.stringify(d, null, 2)}\n${tools.map((t) => `${t.mcp_name}\t${t.capability}\trisk ${t.risk}\n`).join("")}`;
}

export type UpstreamEvent = "upstream.added" | "upstream.removed" | "upstream.disabled" | "upstream.enabled";

/**
 * Appends the administrative change to the tenant's audit ledger, as `tenants delete` records
 * `tenant.deleted`: who (the operator), which upstream, its URL, its headers as references (never a
 * value: the registry holds none), and for an addition the pin's integrity digest and tool count.
 * A change the ledger could not record is said so, naming the change already made.
 */
export async function ledgerUpstreamChange(ledger: ServiceClient<typeof LedgerService>, ctx: CallContext, type: UpstreamEvent, u: TenantUpstream, pin?: string): Promise<number> {
  const event: JsonObject = {
    type,
    upstream: u.name,
    url: typeof u.declaration?.url === "string" ? u.declaration.url : "",
    headers: headerRefs(u.declaration),
    ...(pin ? { pinnedTools: u.pinnedTools, integrityDigest: String((JSON.parse(pin) as { integrityDigest?: unknown }).integrityDigest ?? "") } : {}),
  };
  try {
    const appended = await ledger.append({ event }, { ctx });
    return Number(appended.entry?.seq ?? 0);
  } catch (err) {
    throw new ChaosError("unavailable", `${type} of "${u.name}" for tenant "${u.tenant}" was made, but the ledger did not record it: ${(err as Error).message}`, { cause: err });
  }
}
