import type { JsonObject } from "@bufbuild/protobuf";
import { diffContracts, formatDiff, parseLock, serializeLock, type ContractDiff, type ContractSet } from "@chaos-core/contracts";
import { guardedUpstreamFetch, readUpstreamContracts, upstreamToolNames } from "@chaos-core/cognition";
import { ChaosError, type CallContext, type ServiceClient } from "@chaos-core/kit";
import { checkPin, checkTenantUpstreamDeclaration } from "@chaos-core/policy";
import type { TenantAdminService, TenantUpstream } from "@chaos-core/proto/gen/chaoscore/admin/v1/admin_pb.js";
import type { LedgerService } from "@chaos-core/proto/gen/chaoscore/ledger/v1/ledger_pb.js";
import type { UpstreamsConfig } from "./config.js";
import { localOperator, pinChanges, type PinChange } from "./upstreams-ledger.js";

// `chaos-core upstreams diff|approve NAME --tenant T`: a tenant's registry upstream against its
// pin, and an operator's approval of what it lists now (docs/federation.md §4, §12) — the file's
// `diff` and `approve` (upstreams-command.ts), the pin kept in the registry instead of upstreams.lock.

/** What the command needs to reach the tenant's upstream as `upstreams add --tenant` does. */
export interface RegistryReadOptions {
  readonly client: ServiceClient<typeof TenantAdminService>;
  readonly ctx: CallContext;
  readonly config: UpstreamsConfig;
  readonly version: string;
  readonly say: (line: string) => void;
}

/** The upstream as the registry holds it, its pin, and what it lists now. */
export interface RegistryLive {
  readonly upstream: TenantUpstream;
  /** The stored pin's integrity digest: the approval replaces this pin only. */
  readonly pinDigest: string;
  readonly pinned: ContractSet;
  readonly live: ContractSet;
}

/**
 * Reads the upstream's declaration and pin from the registry, then connects to it as `add` did:
 * through the guarded fetch (its addresses vetted at every request and redirect, with
 * `CHAOS_CORE_HTTP_ALLOWED_ADDRESSES`), its header references resolved in this command's
 * environment, every page of its tools read.
 */
export async function readRegistryLive(tenant: string, name: string, o: RegistryReadOptions): Promise<RegistryLive> {
  const got = await o.client.getUpstream({ tenant, name }, { ctx: o.ctx });
  const upstream = got.upstream!;
  // What the registry holds is checked again before anything connects (kit's schema, HTTP only).
  const declaration = checkTenantUpstreamDeclaration(upstream.declaration, []);
  const lock = parseLock(got.pin);
  o.say(`reading the tools of upstream "${name}" for tenant "${tenant}"`);
  const fetch = guardedUpstreamFetch({ who: `upstream "${name}" of tenant "${tenant}"`, allowedAddresses: o.config.allowedAddresses });
  const live = await readUpstreamContracts({ ...declaration, disabled: false }, { secrets: o.config.secrets, workDir: o.config.workDir, version: o.version, fetch });
  return { upstream, pinDigest: lock.integrityDigest, pinned: lock.contracts, live };
}

/** `upstreams diff NAME --tenant T` as text: the verdict and each change, or that nothing changed. */
export function registryDiffText(name: string, diff: ContractDiff): string {
  return diff.changes.length === 0 ? `${name}: no change since it was pinned\n` : `${name}: ${diff.verdict}\n${formatDiff(diff)}\n`;
}

/** What an approval would pin: the whole of what the upstream lists now, or one tool of it over the pin (the file's `approve`). */
export function approvedContracts(name: string, pinned: ContractSet, live: ContractSet, tool: string | undefined): ContractSet {
  if (tool === undefined) return live;
  if (!live.tools[tool] && !pinned.tools[tool]) throw new ChaosError("not_found", `upstream "${name}" lists no tool "${tool}", and none is pinned`);
  const tools = { ...pinned.tools };
  if (live.tools[tool]) tools[tool] = live.tools[tool];
  else delete tools[tool];
  return { ...pinned, tools };
}

/** An approval found to change something: the new pin (checked as the registry checks it), its verdict and the tools it re-pins. */
export interface RegistryApproval {
  readonly pin: string;
  readonly integrityDigest: string;
  readonly diff: ContractDiff;
  readonly tools: readonly PinChange[];
}

/** The approval of `tool` (or all), or nothing when the pin already matches what the upstream lists. */
export function registryApproval(name: string, current: RegistryLive, tool: string | undefined): RegistryApproval | undefined {
  const next = approvedContracts(name, current.pinned, current.live, tool);
  const diff = diffContracts(current.pinned, next);
  const tools = pinChanges(current.pinned, next);
  if (diff.changes.length === 0 || tools.length === 0) return undefined;
  // Refused here, before the ledger records anything, as cognition would refuse to serve it.
  upstreamToolNames(name, Object.keys(next.tools));
  const checked = checkPin(name, serializeLock(next, name));
  return { pin: checked.text, integrityDigest: checked.integrityDigest, diff, tools };
}

/**
 * Records the approval in the tenant's audit ledger before the registry changes (as the file's
 * `approve` records it before writing the lock): the upstream, the tool when one was named, the
 * verdict, each re-pinned tool's new digest, the pin's integrity digest, and who ran it.
 * Resolves with the entry's sequence number; an approval the ledger cannot record is not made.
 */
export async function ledgerRegistryApproval(ledger: ServiceClient<typeof LedgerService>, ctx: CallContext, name: string, tool: string | undefined, a: RegistryApproval, env: Record<string, string | undefined>): Promise<number> {
  const event: JsonObject = {
    type: "upstream.approved",
    upstream: name,
    ...(tool ? { tool } : {}),
    verdict: a.diff.verdict,
    tools: a.tools.map((t) => ({ ...t })),
    integrityDigest: a.integrityDigest,
    by: localOperator(env),
  };
  try {
    return Number((await ledger.append({ event }, { ctx })).entry?.seq ?? 0);
  } catch (err) {
    throw new ChaosError("unavailable", `the audit ledger of tenant "${ctx.tenant}" could not record the approval, so the registry was not changed: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
  }
}
