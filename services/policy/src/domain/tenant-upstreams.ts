import { deterministicJson, parseLock, serializeLock } from "@chaos-core/contracts";
import { ChaosError, describeZodIssues, upstreamDeclarationSchema, type HttpUpstreamDeclaration } from "@chaos-core/kit";

/**
 * A tenant's own upstreams, declared in the tenant registry (docs/federation.md §3, §12): the
 * operator's file's declaration, Streamable HTTP only, with the pin of its tools. Pure: the
 * checks here name the field at its depth and never echo a header's value.
 */

/** Whether a registered upstream is offered to its tenant. */
export type TenantUpstreamStatus = "enabled" | "disabled";

/** What a tenant's upstream declares: the file's HTTP declaration, without `disabled` (that is the record's status). */
export type TenantUpstreamDeclaration = Omit<HttpUpstreamDeclaration, "disabled">;

/** One of a tenant's upstreams as the registry keeps it. */
export interface TenantUpstreamRecord {
  readonly tenant: string;
  readonly declaration: TenantUpstreamDeclaration;
  readonly status: TenantUpstreamStatus;
  /**
   * The pin: the upstream's entry of `upstreams.lock` (a `chaoscore.lock` document named after the
   * upstream) as JSON text, exactly as `@chaos-core/contracts` serialized it.
   */
  readonly pin: string;
  /** How many tools the pin holds. */
  readonly pinnedTools: number;
  readonly createdAt: Date;
  readonly updatedAt: Date;
  readonly pinnedAt: Date;
}

/** A pin as {@link checkPin} passed it: the only form the registry stores. */
export interface CheckedPin {
  /** The pin's text (the upstream's `upstreams.lock` entry). */
  readonly text: string;
  readonly tools: number;
  /** Its integrity digest (the digest of every tool's contract, as the pin states and as recomputed). */
  readonly integrityDigest: string;
}

/**
 * A tenant's upstreams in the registry. Every change raises the tenant's generation and publishes
 * it before it commits, as a change to the tenant's keys does, so a serving replica that caches a
 * tenant's upstreams by generation sees the change on its next request.
 */
export interface TenantUpstreamRegistry {
  /** Registers a checked declaration with its pin; `already_exists` when the tenant has one of that name. */
  addUpstream(tenant: string, declaration: TenantUpstreamDeclaration, pin: CheckedPin): Promise<TenantUpstreamRecord>;
  listUpstreams(tenant: string): Promise<TenantUpstreamRecord[]>;
  getUpstream(tenant: string, name: string): Promise<TenantUpstreamRecord | undefined>;
  /** Removes it and its pin; `not_found` when the tenant has none of that name. */
  removeUpstream(tenant: string, name: string): Promise<TenantUpstreamRecord>;
  setUpstreamStatus(tenant: string, name: string, status: TenantUpstreamStatus): Promise<TenantUpstreamRecord>;
  /**
   * Replaces the upstream's pin (an operator approved what it lists now), only while the stored
   * pin's integrity digest is `replaces` (`failed_precondition` naming `replaces` otherwise). A
   * pin equal to the stored one changes nothing (`changed: false`, the generation as it was).
   * `not_found` when the tenant has no upstream of that name.
   */
  repinUpstream(tenant: string, name: string, pin: CheckedPin, replaces: string): Promise<{ upstream: TenantUpstreamRecord; changed: boolean }>;
}

function invalid(field: string, problem: string): never {
  throw new ChaosError("invalid_argument", `${field}: ${problem}`);
}

/** Fields only a stdio upstream has: a tenant may not declare one, since only the operator's file starts a process. */
const STDIO_FIELDS = ["command", "args", "env", "cwd", "isolation"] as const;

/**
 * Checks a tenant's upstream declaration (the file's shape for one upstream) with kit's schema:
 * the name rule and its reserved names, secret references only in headers (within the operator's
 * namespace; never a literal), timeout, risk, trustAnnotations. Refused besides, naming the field:
 * a stdio transport (`command` …: only the operator's file may start a process), `disabled` (the
 * registry's status says it), and a name the operator's file already declares (a tenant's
 * upstream may not shadow it). `field` prefixes every path (`declaration.headers.Authorization`).
 * @throws ChaosError `invalid_argument`
 */
export function checkTenantUpstreamDeclaration(value: unknown, operatorUpstreams: readonly string[], field = "declaration"): TenantUpstreamDeclaration {
  if (typeof value !== "object" || value === null || Array.isArray(value)) invalid(field, "required; pass the upstream's declaration as an object ({name, url, headers?, timeoutMs?, risk?, trustAnnotations?})");
  for (const f of STDIO_FIELDS) {
    if (f in value) invalid(`${field}.${f}`, "the tenant registry takes Streamable HTTP upstreams only (url): only the operator's upstreams file may start a process");
  }
  if ("disabled" in value) invalid(`${field}.disabled`, "not part of a registry declaration: its status is set with SetUpstreamStatus (chaos-core upstreams disable|enable)");
  const parsed = upstreamDeclarationSchema.safeParse(value, { reportInput: true });
  if (!parsed.success) throw new ChaosError("invalid_argument", describeZodIssues(parsed.error, upstreamDeclarationSchema, field, { underRoot: true }).join("; "));
  const decl = parsed.data;
  // The schema refuses stdio fields without a url; with none of them above, this is an HTTP upstream.
  if (decl.transport !== "http") invalid(`${field}.url`, "required: the tenant registry takes Streamable HTTP upstreams only");
  if (operatorUpstreams.includes(decl.name)) {
    invalid(`${field}.name`, `"${decl.name}" is an upstream of the operator's upstreams file; a tenant's upstream may not shadow it: choose another name`);
  }
  const { disabled: _disabled, ...declaration } = decl;
  return declaration;
}

/**
 * Checks a pin (the upstream's `upstreams.lock` entry as JSON text) as `chaos-core upstreams lock`
 * writes it: a lock document named after the upstream whose stated digests match its contracts
 * (recomputed, never trusted), holding tools only. Returned in the bytes `@chaos-core/contracts`
 * writes for it, so the same pin is always stored the same.
 * @throws ChaosError `invalid_argument` naming the field (`pin.tools.echo.behavior: …`)
 */
export function checkPin(upstream: string, text: string, field = "pin"): CheckedPin {
  if (text === "") invalid(field, "required; pass the upstream's pin (its upstreams.lock entry, as chaos-core upstreams add --tenant reads it)");
  let lock;
  try {
    lock = parseLock(text);
  } catch (err) {
    invalid(field, (err as Error).message.replace(/^chaoscore\.lock: /, ""));
  }
  if (lock.serverName !== upstream) invalid(`${field}.serverName`, `must be ${JSON.stringify(upstream)}, the upstream's name`);
  const { contracts } = lock;
  for (const kind of ["prompts", "resources", "capabilities"] as const) {
    if (Object.keys(contracts[kind]).length > 0) invalid(`${field}.${kind}`, "must be empty: an upstream's pin holds its tools");
  }
  const pinned = serializeLock(contracts, upstream);
  // Its stated digests are recomputed from its contracts and compared (as upstreams.lock's are).
  if (pinned !== deterministicJson(JSON.parse(text))) invalid(field, "its digests do not match its contracts: pin it again (chaos-core upstreams add --tenant reads the tools and pins them)");
  return { text: pinned, tools: Object.keys(contracts.tools).length, integrityDigest: lock.integrityDigest };
}

/** The integrity digest a stored pin states (checked when it was stored). */
export function pinDigest(text: string): string {
  return parseLock(text).integrityDigest;
}

/** Checks an upstream name given on its own (Get, Remove, SetStatus), naming the field. */
export function checkUpstreamName(name: string, field = "name"): void {
  if (name === "") invalid(field, "required; pass the upstream's name");
  if (!/^[a-z][a-z0-9_]{0,31}$/.test(name)) invalid(field, `"${name.slice(0, 40)}" is not an upstream name (1-32 characters of a-z, 0-9 and _, starting with a letter)`);
}

/** The declaration as it is read back: every header as its reference, which is all the registry holds. */
export function declarationJson(d: TenantUpstreamDeclaration): Record<string, unknown> {
  return {
    name: d.name,
    url: d.url,
    headers: { ...d.headers },
    timeoutMs: d.timeoutMs,
    ...(d.risk ? { risk: d.risk } : {}),
    trustAnnotations: d.trustAnnotations,
  };
}

/** The registry of a policy service without a database: tenant upstreams need one. */
export function unregisteredUpstreams(): TenantUpstreamRegistry {
  const needsDatabase = async (): Promise<never> => {
    throw new ChaosError("failed_precondition", "the tenant registry needs a database: start the policy service with DATABASE_URL");
  };
  return { addUpstream: needsDatabase, listUpstreams: async () => [], getUpstream: async () => undefined, removeUpstream: needsDatabase, setUpstreamStatus: needsDatabase, repinUpstream: needsDatabase };
}
