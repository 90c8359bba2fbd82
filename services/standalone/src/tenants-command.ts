import { resolve } from "node:path";
import type { JsonObject } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { rolesProblem, type CallContext, type Env } from "@chaos-core/kit";
import { TenantStatus } from "@chaos-core/proto/gen/chaoscore/policy/v1/directory_pb.js";
import { parseCommandLine, unknownCommand, UsageError } from "./command-line.js";
import { NEEDS_SERVICES, openAdmin, type Admin } from "./tenant-admin-access.js";
import { applyRetention, deleteTenant, exportTenant } from "./tenant-data.js";
import { keyJson, keyLine, tenantJson, tenantLine } from "./tenant-output.js";
import { allow, days, expiresIn, jsonObjectFile, only, OPTIONS, toolsetsFlag } from "./tenants-flags.js";
import { KEYS_USAGE, TENANTS_USAGE } from "./tenants-usage.js";

/** Where the command writes; the process streams by default, buffers in tests. */
export interface TenantsCommandIo {
  stdout: { write(chunk: string): unknown };
  stderr: { write(chunk: string): unknown };
  env: Env;
}

const EXIT_OK = 0;
const EXIT_FAILED = 1;
const EXIT_USAGE = 2;

const OPERATOR: CallContext = Object.freeze({ tenant: "default", principal: "operator" });

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
      const badRole = rolesProblem(roles);
      if (badRole) throw new UsageError(`--role: ${badRole.problem}`);
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
