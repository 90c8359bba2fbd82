import { ChaosError, isObject } from "@chaos-core/kit";
import { entryDigest, NO_ENTITLEMENTS, NO_GATES, toolContract, type ContractSet, type ToolContract, type ToolSource } from "./contract.js";
import type { JsonSchema } from "./json-schema.js";
import { deterministicJson, jsonObject, parseLock, refusalIn, serializeLock, type Refusal } from "./lockfile.js";

/**
 * The pins of the operator's upstreams (docs/federation.md §4): per upstream, the contract of
 * every tool it listed when it was pinned — the same entries, section digests and verdicts as
 * `chaoscore.lock`, one lock document per upstream — in a file reviewable in git and mounted by a
 * chart. Nothing of an upstream is offered before it is pinned here (or in the tenant registry).
 */
export const UPSTREAMS_LOCK_NAME = "upstreams.lock";
export const UPSTREAMS_LOCK_VERSION = 1;

/** An upstream's tool as `tools/list` describes it (the fields a pin records). */
export interface UpstreamToolDefinition {
  readonly name: string;
  readonly title?: string;
  readonly description?: string;
  readonly inputSchema: Record<string, unknown>;
  readonly outputSchema?: Record<string, unknown>;
  readonly annotations?: {
    readonly title?: string;
    readonly readOnlyHint?: boolean;
    readonly destructiveHint?: boolean;
    readonly idempotentHint?: boolean;
    readonly openWorldHint?: boolean;
  };
}

/**
 * The tool as a contract source. An annotation the upstream leaves out reads as the MCP spec's
 * default — not read-only, destructive, not idempotent, open world — which is also what it means
 * for risk, so a pin never records a hint the upstream did not give as a safer one.
 */
export function upstreamToolSource(upstream: string, tool: UpstreamToolDefinition): ToolSource {
  const a = tool.annotations ?? {};
  return {
    name: tool.name,
    title: tool.title ?? a.title ?? "",
    description: tool.description ?? "",
    toolset: `upstream:${upstream}`,
    inputSchema: tool.inputSchema as JsonSchema,
    outputSchema: (tool.outputSchema ?? {}) as JsonSchema,
    annotations: {
      readOnlyHint: a.readOnlyHint ?? false,
      destructiveHint: a.destructiveHint ?? true,
      idempotentHint: a.idempotentHint ?? false,
      openWorldHint: a.openWorldHint ?? true,
    },
  };
}

/** The contracts of an upstream's tools, keyed by the names the upstream lists them under. */
export function upstreamContracts(upstream: string, tools: readonly UpstreamToolDefinition[]): ContractSet {
  const entries = tools.map((t) => [t.name, toolContract(upstreamToolSource(upstream, t), { gates: NO_GATES, entitlements: NO_ENTITLEMENTS })] as const);
  return { tools: Object.fromEntries(entries), prompts: {}, resources: {}, capabilities: {} };
}

/** The file's text for every upstream's pinned contracts: the same pins always give the same bytes. */
export function serializeUpstreamsLock(pins: ReadonlyMap<string, ContractSet>): string {
  const upstreams = Object.fromEntries([...pins].map(([name, set]) => [name, JSON.parse(serializeLock(set, name)) as unknown]));
  return deterministicJson({ upstreamsLockVersion: UPSTREAMS_LOCK_VERSION, upstreams });
}

/**
 * The pinned contracts by upstream, refusing a malformed file with the field named at its depth
 * (`upstreams.lock: upstreams.files.tools.write_file.behavior: must be an object`). The digests it
 * states are recomputed and compared, never trusted.
 */
export function parseUpstreamsLock(text: string, file = UPSTREAMS_LOCK_NAME): Map<string, ContractSet> {
  // Declared with its type so the compiler narrows after each refusal.
  const bad: Refusal = refusalIn(file);
  const doc = jsonObject(text, bad);
  if (doc.upstreamsLockVersion !== UPSTREAMS_LOCK_VERSION) bad("upstreamsLockVersion", `must be ${UPSTREAMS_LOCK_VERSION}, got ${JSON.stringify(doc.upstreamsLockVersion)}`);
  const upstreams = doc.upstreams;
  if (!isObject(upstreams)) bad("upstreams", "must be an object of pins by upstream name");
  const pins = new Map<string, ContractSet>();
  for (const [name, pin] of Object.entries(upstreams)) {
    const parsed = pinOf(name, pin, bad);
    if (parsed.serverName !== name) bad(`upstreams.${name}.serverName`, `must be ${JSON.stringify(name)}, the pin's key`);
    const stated = serializeLock(parsed.contracts, name);
    if (stated !== deterministicJson(pin)) bad(`upstreams.${name}`, "its digests do not match its contracts: pin it again with chaos-core upstreams lock");
    pins.set(name, parsed.contracts);
  }
  return pins;
}

/** One upstream's pin, parsed as a lock document; parseLock's field names are put under the upstream's path. */
function pinOf(name: string, pin: unknown, bad: Refusal): ReturnType<typeof parseLock> {
  try {
    return parseLock(JSON.stringify(pin));
  } catch (err) {
    return bad(`upstreams.${name}`, (err as Error).message.replace(/^chaoscore\.lock: /, ""));
  }
}

/** One tool's entry of `upstreams.lock`, checked: its contract, its digest, and the entry's text as the lock writes it. */
export interface UpstreamToolEntry {
  readonly contract: ToolContract;
  readonly digest: string;
  readonly text: string;
}

/**
 * One tool's `upstreams.lock` entry given as JSON text (`{digest, sections, surface, behavior, …}`:
 * an approval's contract, docs/federation.md §4), parsed as the lock's own entries are — each
 * section required, `surface.name` the tool's name — and its stated digests recomputed and
 * compared, never trusted. Refused `invalid_argument` naming the field under `field`
 * (`entry.sections.surface: must be a string`).
 */
export function parseUpstreamToolEntry(upstream: string, tool: string, text: string, field = "entry"): UpstreamToolEntry {
  const bad = (path: string, what: string): never => {
    throw new ChaosError("invalid_argument", `${path === "" ? field : `${field}.${path}`}: ${what}`);
  };
  if (tool === "") bad("", "names no tool");
  let entry: unknown;
  try {
    entry = JSON.parse(text);
  } catch (err) {
    bad("", `not JSON: ${(err as Error).message}`);
  }
  if (!isObject(entry)) bad("", "must be a JSON object: the tool's upstreams.lock entry");
  const doc = { lockfileVersion: 1, serverName: upstream, integrityDigest: `sha256:${"0".repeat(64)}`, tools: { [tool]: entry }, prompts: {}, resources: {}, capabilities: {} };
  let contracts: ContractSet;
  try {
    contracts = parseLock(JSON.stringify(doc)).contracts;
  } catch (err) {
    const message = (err as Error).message;
    const prefix = `chaoscore.lock: tools.${tool}`;
    if (!message.startsWith(prefix)) throw err;
    const rest = message.slice(prefix.length);
    return bad(rest.startsWith(".") ? rest.slice(1, rest.indexOf(": ")) : "", rest.slice(rest.indexOf(": ") + 2));
  }
  const contract = contracts.tools[tool]!;
  const written = upstreamToolEntryText(upstream, tool, contract);
  // Its stated digests are recomputed from its sections and compared, as upstreams.lock's are.
  if (written !== deterministicJson(entry)) bad("", "its digests do not match its contracts: read the tool again (chaos-core upstreams approve reads it from the upstream)");
  return { contract, digest: entryDigest(contract), text: written };
}

/** One tool's entry as `upstreams.lock` writes it (`{digest, sections, surface, …}`), as JSON text. */
export function upstreamToolEntryText(upstream: string, tool: string, contract: ToolContract): string {
  const set: ContractSet = { tools: { [tool]: contract }, prompts: {}, resources: {}, capabilities: {} };
  return deterministicJson((JSON.parse(serializeLock(set, upstream)) as { tools: Record<string, unknown> }).tools[tool]);
}
