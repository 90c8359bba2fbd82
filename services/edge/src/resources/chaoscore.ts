import { ChaosError } from "@chaos-core/kit";
import { capabilitiesView } from "../tools/inspect.js";
import { policyView } from "../tools/inspect-policy.js";
import type { StaticResourceDefinition } from "../definitions/resource.js";

/** `chaoscore://policy`: the tenant's live policy document and its version, as `chaoscore_inspect what=policy` shows it. */
const policyResource: StaticResourceDefinition = {
  kind: "static",
  name: "policy",
  uri: "chaoscore://policy",
  title: "Policy",
  description: "The tenant's live policy document, its version, where it came from and when it last changed.",
  cacheHint: { cacheScope: "private", ttlMs: 5000 },
  async read(ctx) {
    return policyView(await ctx.deps.policy.getPolicy({}, { ctx: ctx.call, signal: ctx.signal }));
  },
};

/** `chaoscore://capabilities`: the capability registry, as `chaoscore_inspect what=capabilities` shows it. */
const capabilitiesResource: StaticResourceDefinition = {
  kind: "static",
  name: "capabilities",
  uri: "chaoscore://capabilities",
  title: "Capabilities",
  description: "The capability registry: each capability's risk, behaviour hints and input schema.",
  cacheHint: { cacheScope: "public", ttlMs: 60000 },
  async read(ctx) {
    const res = await ctx.deps.cognition.listCapabilities({}, { ctx: ctx.call, signal: ctx.signal });
    return { capabilities: capabilitiesView(res) };
  },
};

/**
 * `chaoscore://ledger/checkpoint`: the tenant's latest signed checkpoint (a C2SP tlog-checkpoint
 * note) and the key that verifies it; not found while the tenant's log is empty.
 */
const checkpointResource: StaticResourceDefinition = {
  kind: "static",
  name: "ledger-checkpoint",
  uri: "chaoscore://ledger/checkpoint",
  title: "Audit ledger checkpoint",
  description:
    "The latest signed checkpoint of the tenant's audit ledger (a C2SP tlog-checkpoint note: size and root hash) and the " +
    "note verifier key that verifies it. Not found while the tenant's log is empty.",
  cacheHint: { cacheScope: "private", ttlMs: 0 },
  async read(ctx) {
    const ledger = ctx.deps.ledger;
    // Fail closed, as the ledger tools do: no checkpoint is invented without a ledger.
    if (!ledger) throw new ChaosError("unavailable", "no ledger is configured for this edge (LEDGER_ADDR)");
    const { checkpoint } = await ledger.getCheckpoint({}, { ctx: ctx.call, signal: ctx.signal });
    if (!checkpoint) return undefined;
    return { size: Number(checkpoint.size), root_hash: checkpoint.rootHash, note: checkpoint.note, verifier_key: checkpoint.verifierKey };
  },
};

/**
 * `chaoscore://contracts/attestation`: what the start-time contract check found — the server
 * digest of the surface served, whether the signed note verified and with which keys, and the
 * note itself (a C2SP signed note over the digest), so a client verifies it with the release's
 * public key alone (docs/contracts.md §6). Not found where no check ran.
 */
const contractsResource: StaticResourceDefinition = {
  kind: "static",
  name: "contracts-attestation",
  uri: "chaoscore://contracts/attestation",
  title: "Contracts attestation",
  description:
    "The server digest of the tools, prompts, resources and capabilities this server serves (chaoscore.lock), whether its " +
    "signed note verified at start and with which keys, and the note (a C2SP signed note) to verify with the public key.",
  cacheHint: { cacheScope: "public", ttlMs: 300000 },
  async read(ctx) {
    const a = ctx.deps.contracts;
    if (!a) return undefined;
    return { server_digest: a.serverDigest, attested: a.attested, key_names: [...a.keyNames], ...(a.note !== undefined ? { note: a.note } : {}) };
  },
};

/** The static resources: policy, capabilities, the ledger checkpoint, the contracts attestation. */
export const CHAOSCORE_RESOURCES: readonly StaticResourceDefinition[] = [policyResource, capabilitiesResource, checkpointResource, contractsResource];
