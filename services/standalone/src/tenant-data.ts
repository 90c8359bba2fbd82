import { once } from "node:events";
import { createWriteStream } from "node:fs";
import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import { toJson } from "@bufbuild/protobuf";
import { ChaosError, type CallContext, type Logger, type ServiceClient } from "@chaos-core/kit";
import { TenantStatus } from "@chaos-core/proto/gen/chaoscore/policy/v1/directory_pb.js";
import { GetPolicyResponseSchema, type PolicyService } from "@chaos-core/proto/gen/chaoscore/policy/v1/policy_pb.js";
import { type TenantAdminService, type Tenant } from "@chaos-core/proto/gen/chaoscore/admin/v1/admin_pb.js";
import type { CouncilService } from "@chaos-core/proto/gen/chaoscore/council/v1/council_pb.js";
import type { LedgerService } from "@chaos-core/proto/gen/chaoscore/ledger/v1/ledger_pb.js";
import type { MemoryService } from "@chaos-core/proto/gen/chaoscore/memory/v1/memory_pb.js";

/** The services a tenant's data lives in, as an operator reaches them. */
export interface TenantDataServices {
  readonly admin: ServiceClient<typeof TenantAdminService>;
  readonly memory: ServiceClient<typeof MemoryService>;
  readonly council: ServiceClient<typeof CouncilService>;
  readonly ledger: ServiceClient<typeof LedgerService>;
  readonly policy: ServiceClient<typeof PolicyService>;
}

/** One line a person follows while a long operation runs. */
export type Progress = (line: string) => void;

/** The operator of `tenant`: every data call runs as that tenant's, under its row-level security. */
const operatorOf = (tenant: string): CallContext => ({ tenant, principal: "operator" });
/** Exports and deletions of a large tenant take minutes: one generous deadline per call. */
const LONG_CALL_MS = 30 * 60_000;
const DAY_SECONDS = 86_400;

/** Writes a stream of lines to `path`, reporting every 10 000; resolves with the count. */
async function writeLines(path: string, lines: AsyncIterable<{ line: string }>, what: string, progress: Progress): Promise<number> {
  const out = createWriteStream(path, { flags: "wx", mode: 0o600 });
  let n = 0;
  try {
    for await (const { line } of lines) {
      if (!out.write(line)) await once(out, "drain");
      if (++n % 10_000 === 0) progress(`${what}: ${n} lines`);
    }
  } finally {
    out.end();
    await once(out, "close");
  }
  progress(`${what}: ${n} lines written to ${path}`);
  return n;
}

/** What an export wrote. */
export interface ExportSummary {
  readonly dir: string;
  readonly files: Record<string, number>;
}

/**
 * Exports a tenant's data into `dir` (created; it must not hold these files): `tenant.json` (the
 * registry record with its settings — the ledger policy among them —, its keys, never a key itself, and its own upstreams with their pins), `policy.json` (the capability policy in force),
 * `memory.jsonl`, `council.jsonl` and `ledger.jsonl` (`chaos-core-ledger/1`, verifiable with
 * `chaos-core ledger verify --file`). Each stream is read page by page; progress goes to `progress`.
 */
export async function exportTenant(services: TenantDataServices, tenant: string, dir: string, progress: Progress): Promise<ExportSummary> {
  const ctx = operatorOf(tenant);
  const registered = await services.admin.getTenant({ id: tenant }, { ctx }).catch((err: unknown) => {
    if (err instanceof Error && /not_found|not registered/.test(err.message)) return undefined;
    throw err;
  });
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const files: Record<string, number> = {};
  const keys = registered ? (await services.admin.listApiKeys({ tenant }, { ctx })).keys : [];
  const { TenantSchema, ApiKeySchema, TenantUpstreamSchema } = await import("@chaos-core/proto/gen/chaoscore/admin/v1/admin_pb.js");
  // Its own upstreams with their pins (headers are references: the registry holds no secret).
  const upstreams = registered ? (await services.admin.listUpstreams({ tenant }, { ctx })).upstreams : [];
  const pinned = [];
  for (const u of upstreams) {
    const { pin } = await services.admin.getUpstream({ tenant, name: u.name }, { ctx });
    pinned.push({ ...(toJson(TenantUpstreamSchema, u, { useProtoFieldName: true }) as Record<string, unknown>), pin: JSON.parse(pin) as unknown });
  }
  const record = {
    tenant,
    registered: registered !== undefined,
    ...(registered ? { record: toJson(TenantSchema, registered.tenant as Tenant, { useProtoFieldName: true }) } : {}),
    keys: keys.map((k) => toJson(ApiKeySchema, k, { useProtoFieldName: true })),
    upstreams: pinned,
  };
  await writeJson(join(dir, "tenant.json"), record);
  files["tenant.json"] = 1;
  const policy = await services.policy.getPolicy({}, { ctx });
  await writeJson(join(dir, "policy.json"), toJson(GetPolicyResponseSchema, policy, { useProtoFieldName: true }));
  files["policy.json"] = 1;
  const call = { ctx, timeoutMs: LONG_CALL_MS };
  files["memory.jsonl"] = await writeLines(join(dir, "memory.jsonl"), services.memory.exportData({}, call), "memory", progress);
  files["council.jsonl"] = await writeLines(join(dir, "council.jsonl"), services.council.exportData({}, call), "council sessions", progress);
  files["ledger.jsonl"] = await writeLines(join(dir, "ledger.jsonl"), services.ledger.exportEntries({}, call), "ledger", progress);
  return { dir, files };
}

async function writeJson(path: string, value: unknown): Promise<void> {
  const out = createWriteStream(path, { flags: "wx", mode: 0o600 });
  out.end(`${JSON.stringify(value, null, 2)}\n`);
  await once(out, "close");
}

/** What a deletion removed. */
export interface DeleteSummary {
  readonly memoryItems: number;
  readonly councilSessions: number;
  readonly revokedKeys: number;
  readonly ledgerSeq: number;
}

/**
 * Deletes a registered tenant's data: it is disabled first (nothing new is written meanwhile), its
 * memory and council sessions are removed, the deletion is appended to its ledger
 * (`tenant.deleted`, with what was removed: the ledger is append-only and keeps every entry), and
 * the registry marks it deleted, revoking its keys. Run again, it finishes an interrupted deletion.
 */
export async function deleteTenant(services: TenantDataServices, tenant: string, progress: Progress): Promise<DeleteSummary> {
  const ctx = operatorOf(tenant);
  const got = await services.admin.getTenant({ id: tenant }, { ctx });
  if (got.tenant?.status !== TenantStatus.DELETED) {
    await services.admin.setTenantStatus({ id: tenant, status: TenantStatus.DISABLED }, { ctx }).catch((err: unknown) => {
      throw new ChaosError("failed_precondition", `could not disable tenant "${tenant}" before deleting its data: ${(err as Error).message}`);
    });
    progress(`tenant "${tenant}" disabled: no call of it is served while its data is removed`);
  }
  const call = { ctx, timeoutMs: LONG_CALL_MS };
  const memory = await services.memory.deleteData({}, call);
  progress(`memory: ${memory.items} items removed`);
  const council = await services.council.deleteData({}, call);
  progress(`council: ${council.sessions} sessions removed`);
  const marked = got.tenant?.status === TenantStatus.DELETED ? { revokedKeys: 0 } : await services.admin.markTenantDeleted({ id: tenant }, { ctx });
  const appended = await services.ledger.append(
    {
      event: {
        type: "tenant.deleted",
        memoryItems: Number(memory.items),
        councilSessions: Number(council.sessions),
        revokedKeys: marked.revokedKeys,
      },
    },
    { ctx },
  );
  const ledgerSeq = Number(appended.entry?.seq ?? 0);
  progress(`ledger: the deletion recorded as entry ${ledgerSeq}; the ledger keeps its entries`);
  return { memoryItems: Number(memory.items), councilSessions: Number(council.sessions), revokedKeys: marked.revokedKeys, ledgerSeq };
}

/** What retention removed for one tenant. */
export interface RetentionSummary {
  readonly tenant: string;
  readonly memoryDeleted: number;
  readonly councilDeleted: number;
}

/**
 * Applies the registry's retention settings: for each enabled tenant (or the one named) with a
 * memory or council retention, the items and sessions not written for that many days are removed.
 */
export async function applyRetention(services: TenantDataServices, progress: Progress, only?: string): Promise<RetentionSummary[]> {
  const tenants = only
    ? [(await services.admin.getTenant({ id: only }, { ctx: operatorOf(only) })).tenant!]
    : (await services.admin.listTenants({}, { ctx: operatorOf("default") })).tenants;
  const done: RetentionSummary[] = [];
  for (const t of tenants) {
    if (t.status !== TenantStatus.ENABLED && t.status !== TenantStatus.DISABLED) continue;
    const memoryDays = t.settings?.memoryRetentionDays ?? 0;
    const councilDays = t.settings?.councilRetentionDays ?? 0;
    if (memoryDays === 0 && councilDays === 0) continue;
    const call = { ctx: operatorOf(t.id), timeoutMs: LONG_CALL_MS };
    const memoryDeleted = memoryDays > 0 ? Number((await services.memory.applyRetention({ maxAgeSeconds: memoryDays * DAY_SECONDS }, call)).deleted) : 0;
    const councilDeleted = councilDays > 0 ? Number((await services.council.applyRetention({ maxAgeSeconds: councilDays * DAY_SECONDS }, call)).deleted) : 0;
    progress(`tenant "${t.id}": ${memoryDeleted} memory items (older than ${memoryDays || "∞"} days) and ${councilDeleted} council sessions (${councilDays || "∞"} days) removed`);
    done.push({ tenant: t.id, memoryDeleted, councilDeleted });
  }
  return done;
}

/** How often a standalone applies retention, and how long after its start it first does. */
export const RETENTION_SWEEP: Readonly<{ firstAfterMs: number; everyMs: number }> = Object.freeze({ firstAfterMs: 60_000, everyMs: 3_600_000 });

/**
 * The standalone's retention sweeps: {@link applyRetention} for every tenant a minute after the
 * start, then hourly, each sweep logged (a failed one too; the next tries again).
 */
export function startRetentionSweeps(services: TenantDataServices, logger: Logger, timing = RETENTION_SWEEP): { stop(): void } {
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  const sweep = async () => {
    try {
      const done = await applyRetention(services, (line) => logger.info(line));
      if (done.length > 0) logger.info({ tenants: done.length }, "retention applied");
    } catch (err) {
      logger.warn({ err: err instanceof Error ? err.message : String(err) }, "retention sweep failed; the next one tries again");
    }
    if (!stopped) timer = setTimeout(() => void sweep(), timing.everyMs).unref();
  };
  timer = setTimeout(() => void sweep(), timing.firstAfterMs).unref();
  return {
    stop() {
      stopped = true;
      clearTimeout(timer);
    },
  };
}
