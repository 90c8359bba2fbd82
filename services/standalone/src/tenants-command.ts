import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import type { JsonObject } from "@bufbuild/protobuf";
import { timestampDate, timestampFromDate, type Timestamp } from "@bufbuild/protobuf/wkt";
import {
  ContextSigner,
  createGrpcClient,
  createInProcessClient,
  createMemoryTenantGenerations,
  createPostgresDb,
  loadGrpcTransportConfig,
  openGrpcTls,
  createLogger,
  DEFAULT_TOOLSETS,
  TOOLSET_NAMES,
  type CallContext,
  type Db,
  type Env,
  type ServiceClient,
  type TenantGenerations,
} from "@chaos-core/kit";
import { TenantAdminService, type ApiKey, type Tenant } from "@chaos-core/proto/gen/chaoscore/admin/v1/admin_pb.js";
import { KeyStatus, TenantStatus } from "@chaos-core/proto/gen/chaoscore/policy/v1/directory_pb.js";
import { CouncilService } from "@chaos-core/proto/gen/chaoscore/council/v1/council_pb.js";
import { LedgerService } from "@chaos-core/proto/gen/chaoscore/ledger/v1/ledger_pb.js";
import { MemoryService } from "@chaos-core/proto/gen/chaoscore/memory/v1/memory_pb.js";
import { PolicyService } from "@chaos-core/proto/gen/chaoscore/policy/v1/policy_pb.js";
import { adminRpcClient } from "./admin-rpc.js";
import { applyRetention, deleteTenant, exportTenant, type TenantDataServices } from "./tenant-data.js";
import { parseCommandLine, storesFromCommandLine, unknownCommand, UsageError } from "./command-line.js";
import { accessDataDir } from "./data-dir-access.js";
import { openEmbeddedDb } from "./data-dir-layout.js";

/** Where the command writes; the process streams by default, buffers in tests. */
export interface TenantsCommandIo {
  stdout: { write(chunk: string): unknown };
  stderr: { write(chunk: string): unknown };
  env: Env;
}

const WHERE = `Where the registry is: --admin-addr HOST:PORT (or CHAOS_CORE_ADMIN_ADDR), a cluster's tenant
admin API (the policy service's CHAOS_CORE_ADMIN_PORT) over gRPC, each call signed with
CHAOS_CORE_CONTEXT_KEY (TLS by CHAOS_CORE_GRPC_TLS_* as the services); else --database-url /
DATABASE_URL directly (with REDIS_URL set as the edges have it, so they hear of each change);
else the data directory (--data-dir, CHAOS_CORE_DATA_DIR, else the per-user one): through the
server running there, or, with none running, in its embedded database. export, delete and
retention reach a tenant's data: through a running server, or with --admin-addr and
MEMORY_ADDR, COUNCIL_ADDR, LEDGER_ADDR, POLICY_ADDR (the services' addresses).
Add --json for one JSON object per answer. Exits 0 when done, 1 when refused, 2 on a usage error.`;

/** The help text of `chaos-core tenants`. */
export const TENANTS_USAGE = `Usage: chaos-core tenants <command> [options]

Commands:
  create <id>    Register a tenant [--name TEXT] [--memory-retention-days N]
                 [--council-retention-days N] [--toolsets core,council,... | all | default]: the
                 toolsets its clients see (core, council, governance, finance-reference); default
                 core,council,governance: finance-reference's synthetic bank tools are served only
                 where it is listed (or all). stdio serves tenant "default"
                 [--rate-limits FILE | none]: its rate limits, one tenant's entry of the rate
                 limits file as JSON ({tenant?, principal?, tool?, tools?}); they win over
                 CHAOS_CORE_RATE_LIMITS_FILE's entry for it, from its next request
                 [--ledger-policy FILE | none]: its spend policies and tool-approval policy,
                 one tenant's section of the ledger policy file as JSON ({spend_policies?,
                 tool_approval?}); each key it sets wins over CHAOS_CORE_LEDGER_POLICY_FILE's
                 for it, from its next call
  list           Every registered tenant, its status and settings
  show <id>      One tenant, with how many of its keys are active
  disable <id>   Refuse the tenant's every call from its next request on (sessions included)
  enable <id>    Serve it again
  settings <id>  Change its settings (the flags of create; unset flags keep their value)
  export <id>    Write its data to --out DIR (default ./<id>-export): tenant.json, policy.json,
                 memory.jsonl, council.jsonl, ledger.jsonl (chaos-core ledger verify --file)
  delete <id>    --confirm <id>: disable it, remove its memory and council sessions, record the
                 deletion in its ledger (which keeps every entry) and revoke its keys
  retention [<id>]  Apply the retention settings now (every tenant, or one); a cluster runs
                 this on a schedule, a standalone server every hour

${WHERE}
`;

/** The help text of `chaos-core keys`. */
export const KEYS_USAGE = `Usage: chaos-core keys <command> --tenant ID [options]

Commands:
  create         Issue an API key: --principal NAME [--role approver] [--expires-in 30d | 12h | 90m | 45s]
                 The key (cc_<id>_...) is printed once, on stdout; only its SHA-256 is stored
  list           The tenant's keys: id, principal, roles, status, created, expires, last used
  revoke <id>    Refuse the key (its id, the 8 characters after cc_) from its next request on

${WHERE}
`;

const EXIT_OK = 0;
const EXIT_FAILED = 1;
const EXIT_USAGE = 2;

const OPERATOR: CallContext = Object.freeze({ tenant: "default", principal: "operator" });

const OPTIONS = {
  "admin-addr": { type: "string" },
  "database-url": { type: "string" },
  "data-dir": { type: "string" },
  json: { type: "boolean" },
  name: { type: "string" },
  "memory-retention-days": { type: "string" },
  "council-retention-days": { type: "string" },
  toolsets: { type: "string" },
  tenant: { type: "string" },
  principal: { type: "string" },
  role: { type: "string" },
  "expires-in": { type: "string" },
  out: { type: "string" },
  confirm: { type: "string" },
  "rate-limits": { type: "string" },
  "ledger-policy": { type: "string" },
} as const;

type Values = ReturnType<typeof parseCommandLine<typeof OPTIONS>>["values"];

/** The admin client and how to let it go; with the data services where the registry was reached through them. */
interface Admin {
  client: ServiceClient<typeof TenantAdminService>;
  where: string;
  /** Set when the tenants' data is reachable (a running server, or a cluster's addresses). */
  data?: TenantDataServices;
  close(): Promise<void>;
}

/** Why export, delete and retention cannot run on what `where` reached. */
const NEEDS_SERVICES =
  "needs the tenant's services: run it against a running server (chaos-core serve on this data directory) or a cluster " +
  "(--admin-addr with MEMORY_ADDR, COUNCIL_ADDR, LEDGER_ADDR and POLICY_ADDR)";

async function directAdmin(open: () => Promise<{ db: Db; release(): Promise<void> }>, generations: TenantGenerations, where: string): Promise<Admin> {
  const { migratePolicy, createSqlTenantRegistry, createTenantAdminHandlers } = await import("@chaos-core/policy");
  const { db, release } = await open();
  try {
    await migratePolicy(db);
  } catch (err) {
    await release();
    throw err;
  }
  const client = createInProcessClient(TenantAdminService, createTenantAdminHandlers(createSqlTenantRegistry(db, { generations })));
  return { client, where, close: release };
}

/** Finds the registry: the cluster's admin API, Postgres, or the data directory's (see {@link WHERE}). */
async function openAdmin(values: Values, env: Env): Promise<Admin> {
  const addr = values["admin-addr"] ?? env.CHAOS_CORE_ADMIN_ADDR;
  if (addr !== undefined && addr !== "") {
    if (values["database-url"] !== undefined || values["data-dir"] !== undefined) throw new UsageError("give --admin-addr or a store (--database-url, --data-dir), not both");
    const key = env.CHAOS_CORE_CONTEXT_KEY;
    if (!key) throw new Error("CHAOS_CORE_CONTEXT_KEY is required to call the tenant admin API (the cluster's call-context key)");
    const tlsConfig = loadGrpcTransportConfig(env).tls;
    const tls = tlsConfig ? openGrpcTls(tlsConfig, { logger: createLogger("chaos-core-tenants", "silent") }) : undefined;
    const signer = new ContextSigner(key);
    const options = tls ? { tls } : {};
    const grpc = createGrpcClient(TenantAdminService, addr, signer, options);
    const closers: Array<() => void> = [() => grpc.close()];
    let data: TenantDataServices | undefined;
    const { MEMORY_ADDR, COUNCIL_ADDR, LEDGER_ADDR, POLICY_ADDR } = env;
    if (MEMORY_ADDR && COUNCIL_ADDR && LEDGER_ADDR && POLICY_ADDR) {
      const memory = createGrpcClient(MemoryService, MEMORY_ADDR, signer, options);
      const council = createGrpcClient(CouncilService, COUNCIL_ADDR, signer, options);
      const ledger = createGrpcClient(LedgerService, LEDGER_ADDR, signer, options);
      const policy = createGrpcClient(PolicyService, POLICY_ADDR, signer, options);
      closers.push(() => memory.close(), () => council.close(), () => ledger.close(), () => policy.close());
      data = { admin: grpc.client, memory: memory.client, council: council.client, ledger: ledger.client, policy: policy.client };
    }
    return {
      client: grpc.client,
      where: `the tenant admin API at ${addr}`,
      ...(data ? { data } : {}),
      close: async () => {
        for (const close of closers) close();
        tls?.close();
      },
    };
  }
  const stores = storesFromCommandLine(values, env);
  if (stores.kind === "postgres") {
    const redisUrl = env.REDIS_URL;
    let generations = createMemoryTenantGenerations();
    let closeRedis = async () => undefined as void;
    if (redisUrl) {
      const redisModule = await import("@chaos-core/kit/redis");
      const { createRedisTenantGenerations } = await import("@chaos-core/kit");
      const redis = await redisModule.connectRedis(redisUrl, { logger: createLogger("chaos-core-tenants", "silent"), name: "chaos-core-tenants" });
      generations = createRedisTenantGenerations(redis, { prefix: env.CHAOS_CORE_REDIS_PREFIX || "chaoscore:" });
      closeRedis = () => redisModule.closeRedis(redis);
    }
    const admin = await directAdmin(
      async () => {
        const db = createPostgresDb({ connectionString: stores.url, max: 2, applicationName: "chaos-core-tenants-cli" });
        return { db, release: async () => (await db.close(), await closeRedis()) };
      },
      generations,
      redisUrl ? "postgres (edges told through Redis)" : "postgres",
    );
    return admin;
  }
  const access = await accessDataDir(stores.dataDir);
  if (access.running) {
    const admin = adminRpcClient(TenantAdminService, access.admin);
    const data: TenantDataServices = {
      admin,
      memory: adminRpcClient(MemoryService, access.admin),
      council: adminRpcClient(CouncilService, access.admin),
      ledger: adminRpcClient(LedgerService, access.admin),
      policy: adminRpcClient(PolicyService, access.admin),
    };
    return { client: admin, data, where: `the server running on ${stores.dataDir}`, close: async () => undefined };
  }
  return directAdmin(
    async () => {
      try {
        // Created on a first use: an operator may register tenants before the first start.
        const db = await openEmbeddedDb(stores.dataDir, { create: true });
        return { db, release: async () => (await db.close(), await access.release()) };
      } catch (err) {
        await access.release();
        throw err;
      }
    },
    createMemoryTenantGenerations(),
    `the embedded database in ${stores.dataDir} (no server running; the next start serves it)`,
  );
}

const STATUS_NAME: Record<number, string> = {
  [TenantStatus.ENABLED]: "enabled",
  [TenantStatus.DISABLED]: "disabled",
  [TenantStatus.DELETED]: "deleted",
};
const KEY_STATUS_NAME: Record<number, string> = { [KeyStatus.ACTIVE]: "active", [KeyStatus.REVOKED]: "revoked", [KeyStatus.EXPIRED]: "expired" };
const iso = (t: Timestamp | undefined) => (t ? timestampDate(t).toISOString() : null);

/**
 * The toolsets `--toolsets` names: a list, `all` (every toolset, the opt-in finance-reference
 * included), or `default` (the empty list: the default toolsets, whatever a release makes them).
 */
function toolsetsFlag(value: string): string[] {
  if (value === "default") return [];
  if (value === "all") return [...TOOLSET_NAMES];
  return value.split(",").map((t) => t.trim()).filter(Boolean);
}

/** A tenant as `--json` prints it. */
function tenantJson(t: Tenant) {
  return {
    id: t.id,
    display_name: t.displayName,
    status: STATUS_NAME[t.status] ?? "unknown",
    settings: {
      memory_retention_days: t.settings?.memoryRetentionDays ?? 0,
      council_retention_days: t.settings?.councilRetentionDays ?? 0,
      toolsets: [...(t.settings?.toolsets ?? [])],
      rate_limits: t.settings?.rateLimits ?? null,
      ledger_policy: t.settings?.ledgerPolicy ?? null,
    },
    generation: Number(t.generation),
    created_at: iso(t.createdAt),
    updated_at: iso(t.updatedAt),
  };
}

/** A key as `--json` prints it (never the key itself). */
function keyJson(k: ApiKey) {
  return {
    key_id: k.keyId,
    prefix: `cc_${k.keyId}_`,
    tenant: k.tenant,
    principal: k.principal,
    roles: [...k.roles],
    status: KEY_STATUS_NAME[k.status] ?? "unknown",
    created_at: iso(k.createdAt),
    expires_at: iso(k.expiresAt),
    revoked_at: iso(k.revokedAt),
    last_used_at: iso(k.lastUsedAt),
  };
}

function tenantLine(t: ReturnType<typeof tenantJson>): string {
  const s = t.settings;
  const retention = `memory ${s.memory_retention_days || "∞"}d, council ${s.council_retention_days || "∞"}d`;
  const toolsets = s.toolsets.length > 0 ? s.toolsets.join(",") : `default toolsets (${DEFAULT_TOOLSETS.join(",")})`;
  return `${t.id}\t${t.status}\t${t.display_name || "-"}\t${retention}\t${toolsets}\n`;
}

function keyLine(k: ReturnType<typeof keyJson>): string {
  return `${k.prefix}\t${k.principal}\t${k.roles.join(",") || "-"}\t${k.status}\tcreated ${k.created_at}\texpires ${k.expires_at ?? "never"}\tlast used ${k.last_used_at ?? "never"}\n`;
}

function days(values: Values, flag: "memory-retention-days" | "council-retention-days"): number | undefined {
  const v = values[flag];
  if (v === undefined) return undefined;
  if (!/^[0-9]{1,5}$/.test(v)) throw new UsageError(`--${flag} must be a whole number of days (0 keeps data for ever), got "${v}"`);
  return Number(v);
}

/** `--expires-in 30d | 12h | 90m` as a date from now. */
function expiresIn(v: string | undefined): Date | undefined {
  if (v === undefined) return undefined;
  const m = /^([1-9][0-9]{0,5})([dhms])$/.exec(v);
  if (!m) throw new UsageError(`--expires-in must be a number and a unit, like 30d, 12h, 90m or 45s; got "${v}"`);
  const unit = { d: 86_400_000, h: 3_600_000, m: 60_000, s: 1_000 }[m[2] as "d" | "h" | "m" | "s"];
  return new Date(Date.now() + Number(m[1]) * unit);
}

/**
 * A settings flag's `FILE` as the JSON object it holds (the registry checks its fields); `none`
 * clears the setting. `shape` says in the error what the object holds.
 */
function jsonObjectFile(flag: string, v: string, shape: string): JsonObject | undefined {
  if (v === "none") return undefined;
  let text: string;
  try {
    text = readFileSync(v, "utf8");
  } catch (err) {
    throw new UsageError(`--${flag}: cannot read ${v} (${(err as NodeJS.ErrnoException).code ?? String(err)})`);
  }
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (err) {
    throw new UsageError(`--${flag}: ${v} is not JSON (${(err as Error).message})`);
  }
  if (doc === null || typeof doc !== "object" || Array.isArray(doc)) throw new UsageError(`--${flag}: ${v} must hold a JSON object (${shape})`);
  return doc as JsonObject;
}

function only(positionals: string[], what: string): string {
  if (positionals.length !== 1) throw new UsageError(`expected exactly one ${what}`);
  return positionals[0]!;
}

/** Flags that belong to other commands are a usage error, not silently ignored. */
function allow(values: Values, command: string, allowed: string[]): void {
  const common = ["admin-addr", "database-url", "data-dir", "json"];
  for (const [flag, value] of Object.entries(values)) {
    if (value !== undefined && !common.includes(flag) && !allowed.includes(flag)) throw new UsageError(`--${flag} does not belong to ${command}`);
  }
}

async function run(group: "tenants" | "keys", argv: string[], io: TenantsCommandIo): Promise<number> {
  const usage = group === "tenants" ? TENANTS_USAGE : KEYS_USAGE;
  const [command, ...rest] = argv;
  let json = false;
  try {
    if (command === undefined) throw new UsageError(group === "tenants" ? "name a command: create, list, show, disable, enable or settings" : "name a command: create, list or revoke");
    if (command === "help" || command === "--help" || command === "-h") {
      io.stdout.write(usage);
      return EXIT_OK;
    }
    const commands = group === "tenants" ? ["create", "list", "show", "disable", "enable", "settings", "export", "delete", "retention"] : ["create", "list", "revoke"];
    if (!commands.includes(command)) throw unknownCommand(`${group} command`, command, [...commands, "help"]);
    const { values, positionals } = parseCommandLine(rest, OPTIONS, { positionals: true });
    json = values.json === true;
    const settingsFlags = ["name", "memory-retention-days", "council-retention-days", "toolsets", "rate-limits", "ledger-policy"];
    const settingsOf = (): { councilRetentionDays?: number; memoryRetentionDays?: number; toolsets?: string[]; rateLimits?: JsonObject; ledgerPolicy?: JsonObject } => {
      const memory = days(values, "memory-retention-days");
      const council = days(values, "council-retention-days");
      return {
        ...(memory !== undefined ? { memoryRetentionDays: memory } : {}),
        ...(council !== undefined ? { councilRetentionDays: council } : {}),
        ...(values.toolsets !== undefined ? { toolsets: toolsetsFlag(values.toolsets) } : {}),
        ...(values["rate-limits"] !== undefined ? { rateLimits: jsonObjectFile("rate-limits", values["rate-limits"], "{tenant?, principal?, tool?, tools?}") } : {}),
        ...(values["ledger-policy"] !== undefined ? { ledgerPolicy: jsonObjectFile("ledger-policy", values["ledger-policy"], "{spend_policies?, tool_approval?}") } : {}),
      };
    };
    const tenantFlag = () => {
      if (!values.tenant) throw new UsageError("--tenant is required: the tenant the keys belong to");
      return values.tenant;
    };

    // Each command's arguments are checked before the registry is opened.
    let act: (admin: Admin) => Promise<string>;
    const out = (object: unknown, text: string) => (json ? `${JSON.stringify(object)}\n` : text);
    if (group === "tenants") {
      if (command === "list") {
        allow(values, command, []);
        if (positionals.length > 0) throw new UsageError("list takes no arguments");
        act = async ({ client }) => {
          const tenants = (await client.listTenants({}, { ctx: OPERATOR })).tenants.map(tenantJson);
          return out({ tenants }, tenants.length === 0 ? "no tenants are registered (chaos-core tenants create <id>)\n" : tenants.map(tenantLine).join(""));
        };
      } else if (command === "create") {
        allow(values, command, settingsFlags);
        const id = only(positionals, "tenant id");
        const settings = settingsOf();
        act = async ({ client }) => {
          const t = tenantJson((await client.createTenant({ id, displayName: values.name ?? "", settings: { toolsets: [], ...settings } }, { ctx: OPERATOR })).tenant!);
          return out({ tenant: t }, `tenant "${t.id}" created\n${tenantLine(t)}`);
        };
      } else if (command === "settings") {
        allow(values, command, settingsFlags.filter((f) => f !== "name"));
        const id = only(positionals, "tenant id");
        const change = settingsOf();
        if (Object.keys(change).length === 0) throw new UsageError("settings needs at least one of --memory-retention-days, --council-retention-days, --toolsets, --rate-limits, --ledger-policy");
        act = async ({ client }) => {
          const current = (await client.getTenant({ id }, { ctx: OPERATOR })).tenant!;
          const merged = { ...current.settings!, ...change };
          const t = tenantJson((await client.updateTenantSettings({ id, settings: merged }, { ctx: OPERATOR })).tenant!);
          return out({ tenant: t }, `tenant "${t.id}" settings changed\n${tenantLine(t)}`);
        };
      } else if (command === "export") {
        allow(values, command, ["out"]);
        const id = only(positionals, "tenant id");
        const dir = resolve(values.out ?? `${id}-export`);
        act = async ({ data }) => {
          if (!data) throw new Error(`export ${NEEDS_SERVICES}`);
          const summary = await exportTenant(data, id, dir, (line) => io.stderr.write(`${line}\n`));
          return out(summary, `tenant "${id}" exported to ${summary.dir}\n`);
        };
      } else if (command === "delete") {
        allow(values, command, ["confirm"]);
        const id = only(positionals, "tenant id");
        if (values.confirm !== id) throw new UsageError(`delete removes the tenant's data for good: repeat its id, --confirm ${id} (export it first: chaos-core tenants export ${id})`);
        act = async ({ data }) => {
          if (!data) throw new Error(`delete ${NEEDS_SERVICES}`);
          const summary = await deleteTenant(data, id, (line) => io.stderr.write(`${line}\n`));
          return out(
            { tenant: id, memory_items: summary.memoryItems, council_sessions: summary.councilSessions, revoked_keys: summary.revokedKeys, ledger_seq: summary.ledgerSeq },
            `tenant "${id}" deleted: ${summary.memoryItems} memory items and ${summary.councilSessions} council sessions removed, ${summary.revokedKeys} keys revoked; its ledger keeps its entries and records the deletion (entry ${summary.ledgerSeq})\n`,
          );
        };
      } else if (command === "retention") {
        allow(values, command, []);
        if (positionals.length > 1) throw new UsageError("retention takes at most one tenant id");
        const id = positionals[0];
        act = async ({ data }) => {
          if (!data) throw new Error(`retention ${NEEDS_SERVICES}`);
          const done = await applyRetention(data, (line) => io.stderr.write(`${line}\n`), id);
          return out(
            { tenants: done.map((d) => ({ tenant: d.tenant, memory_deleted: d.memoryDeleted, council_deleted: d.councilDeleted })) },
            done.length === 0 ? "no tenant has a retention setting\n" : `retention applied to ${done.length} tenant(s)\n`,
          );
        };
      } else if (command === "show") {
        allow(values, command, []);
        const id = only(positionals, "tenant id");
        act = async ({ client }) => {
          const r = await client.getTenant({ id }, { ctx: OPERATOR });
          const t = tenantJson(r.tenant!);
          return out({ tenant: t, active_keys: r.activeKeys }, `${tenantLine(t)}active keys: ${r.activeKeys}\ncreated ${t.created_at}, changed ${t.updated_at} (generation ${t.generation})\n`);
        };
      } else {
        allow(values, command, []);
        const id = only(positionals, "tenant id");
        const status = command === "disable" ? TenantStatus.DISABLED : TenantStatus.ENABLED;
        act = async ({ client }) => {
          const t = tenantJson((await client.setTenantStatus({ id, status }, { ctx: OPERATOR })).tenant!);
          return out({ tenant: t }, command === "disable" ? `tenant "${t.id}" disabled: its next request is refused\n` : `tenant "${t.id}" enabled\n`);
        };
      }
    } else if (command === "create") {
      allow(values, command, ["tenant", "principal", "role", "expires-in"]);
      if (positionals.length > 0) throw new UsageError("create takes no arguments: --tenant and --principal say whose key it is");
      const tenant = tenantFlag();
      if (!values.principal) throw new UsageError("--principal is required: who the key is for");
      const principal = values.principal;
      const roles = values.role ? values.role.split(",").map((r) => r.trim()).filter(Boolean) : [];
      const expires = expiresIn(values["expires-in"]);
      act = async ({ client }) => {
        const r = await client.createApiKey({ tenant, principal, roles, ...(expires ? { expiresAt: timestampFromDate(expires) } : {}) }, { ctx: OPERATOR });
        const k = keyJson(r.key!);
        // The key on stdout, alone on its line; what it is on stderr: `… > key.txt` keeps only the key.
        if (!json) io.stderr.write(`API key ${k.prefix}… for ${k.principal} of tenant "${k.tenant}"${k.roles.length ? ` (${k.roles.join(", ")})` : ""}, expires ${k.expires_at ?? "never"}. It is shown this once; only its SHA-256 is kept.\n`);
        return out({ key: k, secret: r.secret }, `${r.secret}\n`);
      };
    } else if (command === "list") {
      allow(values, command, ["tenant"]);
      if (positionals.length > 0) throw new UsageError("list takes no arguments");
      const tenant = tenantFlag();
      act = async ({ client }) => {
        const keys = (await client.listApiKeys({ tenant }, { ctx: OPERATOR })).keys.map(keyJson);
        return out({ tenant, keys }, keys.length === 0 ? `tenant "${tenant}" has no keys\n` : keys.map(keyLine).join(""));
      };
    } else {
      allow(values, command, ["tenant"]);
      const tenant = tenantFlag();
      const keyId = only(positionals, "key id").replace(/^cc_/, "").replace(/_$/, "");
      act = async ({ client }) => {
        const k = keyJson((await client.revokeApiKey({ tenant, keyId }, { ctx: OPERATOR })).key!);
        return out({ key: k }, `key ${k.prefix} of ${k.principal} revoked: its next request is refused\n`);
      };
    }

    const admin = await openAdmin(values, io.env);
    try {
      io.stdout.write(await act(admin));
    } finally {
      await admin.close();
    }
    return EXIT_OK;
  } catch (err) {
    if (err instanceof UsageError) {
      io.stderr.write(`chaos-core ${group}: ${err.message}\n\n${usage}`);
      return EXIT_USAGE;
    }
    const message = err instanceof Error ? err.message : String(err);
    io.stderr.write(`chaos-core ${group}: ${message}\n`);
    if (json) io.stdout.write(`${JSON.stringify({ error: message })}\n`);
    return EXIT_FAILED;
  }
}

/** Runs `chaos-core tenants …` (argv after `tenants`) and resolves with the exit code. */
export function runTenantsCommand(argv: string[], io: TenantsCommandIo): Promise<number> {
  return run("tenants", argv, io);
}

/** Runs `chaos-core keys …` (argv after `keys`) and resolves with the exit code. */
export function runKeysCommand(argv: string[], io: TenantsCommandIo): Promise<number> {
  return run("keys", argv, io);
}
