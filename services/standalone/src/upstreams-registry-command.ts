import { existsSync, readFileSync } from "node:fs";
import { readFile } from "node:fs/promises";
import type { JsonObject } from "@bufbuild/protobuf";
import { diffContracts, formatDiff, serializeLock } from "@chaos-core/contracts";
import { guardedUpstreamFetch, readUpstreamContracts } from "@chaos-core/cognition";
import { parseUpstreamsFile, type CallContext } from "@chaos-core/kit";
import { checkTenantUpstreamDeclaration, createUpstreamUrlCheck, declarationJson } from "@chaos-core/policy";
import { UpstreamStatus } from "@chaos-core/proto/gen/chaoscore/admin/v1/admin_pb.js";
import { parseCommandLine, UsageError } from "./command-line.js";
import { loadUpstreamsConfig, type UpstreamsConfig } from "./config.js";
import { openAdmin, type Admin } from "./tenant-admin-access.js";
import { ledgerRegistryApproval, readRegistryLive, registryApproval, registryDiffText } from "./upstreams-registry-approve.js";
import { ledgerUpstreamChange, pinnedToolsOf, upstreamJson, upstreamLine, upstreamShown } from "./upstreams-registry-output.js";

/** Where the command writes, and the environment it reads (`chaos-core upstreams`'s). */
export interface RegistryCommandIo {
  stdout: { write(chunk: string): unknown };
  stderr: { write(chunk: string): unknown };
  env: Record<string, string | undefined>;
  /** The version Chaos Core names itself with to upstreams. */
  version: string;
}

/** The subcommands only the registry has: they always act on a tenant's upstreams. */
const REGISTRY_ONLY = ["add", "remove", "disable", "enable"] as const;

/**
 * Whether `chaos-core upstreams <command> …` is about a tenant's upstreams in the registry: one of
 * {@link REGISTRY_ONLY}, or any command given `--tenant` (`list`, `show`, `diff`, `approve`).
 */
export function isRegistryCommand(command: string, rest: readonly string[]): boolean {
  return (REGISTRY_ONLY as readonly string[]).includes(command) || rest.some((a) => a === "--tenant" || a.startsWith("--tenant="));
}

/** The usage of the registry's subcommands, printed with the file's. */
export const REGISTRY_USAGE = `A tenant's own upstreams, in the tenant registry (Streamable HTTP only; docs/federation.md §12):
  add <name> --tenant T --url URL [--header NAME=env:VAR|file:NAME] [--timeout-ms N]
             [--risk low|medium|high|critical] [--trust-annotations true|false]
  add --tenant T --declaration FILE
               Checks the declaration and the URL's addresses (no loopback, link-local, private or
               metadata address unless in CHAOS_CORE_HTTP_ALLOWED_ADDRESSES), connects, reads its
               tools (every page) and pins them in the registry; ledgered (upstream.added)
  list --tenant T | show <name> --tenant T
  remove|disable|enable <name> --tenant T
               Ledgered (upstream.removed|disabled|enabled). Changes need the tenant's ledger: a
               running server on the data directory, or a cluster (--admin-addr and LEDGER_ADDR …)
  diff <name> --tenant T
               Connects as add does and prints the verdicts between the registry's pin and what
               the upstream lists now (COSMETIC, SAFE, RISKY, BREAKING), per tool and section
  approve <name> [<tool>] --tenant T
               Re-pins what the upstream lists now — one tool, or all of it — in the registry,
               after reviewing the diff: a tool quarantined for a changed definition is served to
               the tenant again from its next request. Recorded in the tenant's ledger first
               (upstream.approved: the tool, the verdict, each new digest, the OS user)
  Where the registry is: --admin-addr, --database-url or --data-dir, as for chaos-core tenants.`;

const OPTIONS = {
  tenant: { type: "string" },
  url: { type: "string" },
  header: { type: "string" },
  "timeout-ms": { type: "string" },
  risk: { type: "string" },
  "trust-annotations": { type: "string" },
  declaration: { type: "string" },
  upstreams: { type: "string" },
  json: { type: "boolean" },
  "admin-addr": { type: "string" },
  "database-url": { type: "string" },
  "data-dir": { type: "string" },
} as const;
type Values = ReturnType<typeof parseCommandLine<typeof OPTIONS>>["values"];

/** `NAME=env:VAR`, `NAME=file:NAME` or `NAME={…json…}`; anything else is passed as the literal it is, for the registry to refuse naming it. */
function headerFlag(value: string): Record<string, unknown> {
  const eq = value.indexOf("=");
  if (eq <= 0) throw new UsageError("--header takes NAME=env:VARIABLE or NAME=file:FILE");
  const name = value.slice(0, eq);
  const ref = value.slice(eq + 1);
  if (ref.startsWith("env:")) return { [name]: { env: ref.slice(4) } };
  if (ref.startsWith("file:")) return { [name]: { file: ref.slice(5) } };
  if (ref.startsWith("{")) return { [name]: JSON.parse(ref) as unknown };
  return { [name]: ref };
}

/** The declaration `add` was given: a file (one entry of the upstreams file's shape), or the flags. */
function declarationOf(values: Values, positionals: string[]): Record<string, unknown> {
  if (values.declaration !== undefined) {
    if (positionals.length > 0 || values.url !== undefined || values.header !== undefined) throw new UsageError("give --declaration FILE or a name with --url, not both");
    const value = JSON.parse(readFileSync(values.declaration, "utf8")) as unknown;
    if (typeof value !== "object" || value === null || Array.isArray(value)) throw new UsageError(`${values.declaration}: must hold one upstream declaration, an object`);
    return value as Record<string, unknown>;
  }
  if (positionals.length !== 1) throw new UsageError("add takes the upstream's name, with --url (or --declaration FILE)");
  if (values.url === undefined) throw new UsageError("--url is required: the upstream's Streamable HTTP endpoint");
  const timeout = values["timeout-ms"];
  const trust = values["trust-annotations"];
  if (trust !== undefined && trust !== "true" && trust !== "false") throw new UsageError("--trust-annotations takes true or false");
  return {
    name: positionals[0],
    url: values.url,
    ...(values.header !== undefined ? { headers: headerFlag(values.header) } : {}),
    ...(timeout !== undefined ? { timeoutMs: Number(timeout) } : {}),
    ...(values.risk !== undefined ? { risk: { default: values.risk } } : {}),
    ...(trust !== undefined ? { trustAnnotations: trust === "true" } : {}),
  };
}

async function operatorNames(config: UpstreamsConfig): Promise<string[]> {
  if (!existsSync(config.file)) return [];
  return parseUpstreamsFile(await readFile(config.file, "utf8"), config.file).map((u) => u.name);
}

/**
 * Runs `chaos-core upstreams …` for a tenant's upstreams in the registry; resolves with the exit
 * code (0 done, 1 refused, 2 usage). `usage` is the whole command's help.
 */
export async function runRegistryUpstreamsCommand(args: string[], io: RegistryCommandIo, usage: string): Promise<number> {
  const [command = "", ...rest] = args;
  let json = false;
  try {
    if (!["add", "remove", "disable", "enable", "list", "show", "diff", "approve"].includes(command)) {
      throw new UsageError(`${command} --tenant: not a command for a tenant's upstreams (add, list, show, remove, disable, enable, diff, approve)`);
    }
    const { values, positionals } = parseCommandLine(rest, OPTIONS, { positionals: true });
    json = values.json === true;
    const tenant = values.tenant;
    if (!tenant) throw new UsageError("--tenant is required: the tenant whose upstreams these are");
    const env = values.upstreams ? { ...io.env, CHAOS_CORE_UPSTREAMS_FILE: values.upstreams } : io.env;
    const config = loadUpstreamsConfig(env);
    const ctx: CallContext = { tenant, principal: "operator" };
    const out = (object: unknown, text: string) => io.stdout.write(json ? `${JSON.stringify(object)}\n` : text);
    const name = () => {
      if (positionals.length !== 1) throw new UsageError(`${command} takes the upstream's name`);
      return positionals[0]!;
    };

    let act: (admin: Admin) => Promise<void>;
    if (command === "list") {
      act = async ({ client }) => {
        const upstreams = (await client.listUpstreams({ tenant }, { ctx })).upstreams;
        out({ tenant, upstreams: upstreams.map(upstreamJson) }, upstreams.length === 0 ? `tenant "${tenant}" has no upstreams (chaos-core upstreams add --tenant ${tenant} …)\n` : upstreams.map(upstreamLine).join(""));
      };
    } else if (command === "show") {
      const n = name();
      act = async ({ client }) => {
        const got = await client.getUpstream({ tenant, name: n }, { ctx });
        out({ upstream: upstreamJson(got.upstream!), tools: pinnedToolsOf(got.upstream!, got.pin) }, upstreamShown(got.upstream!, got.pin));
      };
    } else if (command === "add") {
      // Checked here first, as the registry checks it again: a bad declaration never connects anywhere.
      const declaration = checkTenantUpstreamDeclaration(declarationOf(values, positionals), await operatorNames(config));
      await createUpstreamUrlCheck({ allowedAddresses: config.allowedAddresses })(declaration.url);
      act = async ({ client, data }) => {
        if (!data) throw new Error(`add needs the tenant's ledger, where the change is recorded: run it against a running server (chaos-core serve on this data directory) or a cluster (--admin-addr with LEDGER_ADDR, MEMORY_ADDR, COUNCIL_ADDR and POLICY_ADDR)`);
        await client.getTenant({ id: tenant }, { ctx });
        io.stderr.write(`chaos-core: reading the tools of upstream "${declaration.name}" for tenant "${tenant}"\n`);
        const fetch = guardedUpstreamFetch({ who: `upstream "${declaration.name}" of tenant "${tenant}"`, allowedAddresses: config.allowedAddresses });
        const contracts = await readUpstreamContracts({ ...declaration, disabled: false }, { secrets: config.secrets, workDir: config.workDir, version: io.version, fetch });
        const pin = serializeLock(contracts, declaration.name);
        const added = (await client.addUpstream({ tenant, declaration: declarationJson(declaration) as JsonObject, pin }, { ctx })).upstream!;
        const seq = await ledgerUpstreamChange(data.ledger, ctx, "upstream.added", added, pin);
        out({ upstream: upstreamJson(added), ledger_seq: seq }, `upstream "${added.name}" added for tenant "${tenant}", ${added.pinnedTools} tools pinned (ledger entry ${seq})\n${upstreamLine(added)}`);
      };
    } else if (command === "diff" || command === "approve") {
      if (positionals.length < 1 || positionals.length > (command === "approve" ? 2 : 1)) throw new UsageError(command === "approve" ? "approve takes the upstream's name and, optionally, one tool" : "diff takes the upstream's name");
      const [n, tool] = positionals as [string, string | undefined];
      act = async ({ client, data }) => {
        const read = { client, ctx, config, version: io.version, say: (line: string) => io.stderr.write(`chaos-core: ${line}\n`) };
        if (command === "approve" && !data) throw new Error(`approve needs the tenant's ledger, where the approval is recorded: run it against a running server (chaos-core serve on this data directory) or a cluster (--admin-addr with LEDGER_ADDR …)`);
        const current = await readRegistryLive(tenant, n, read);
        if (command === "diff") {
          const diff = diffContracts(current.pinned, current.live);
          out({ tenant, ...diff }, registryDiffText(n, diff));
          return;
        }
        const approval = registryApproval(n, current, tool);
        const what = `${n}${tool ? `/${tool}` : ""}`;
        if (!approval) {
          out({ tenant, upstream: n, ...(tool ? { tool } : {}), changed: false }, `${what}: the pin already matches what the upstream lists; nothing changed\n`);
          return;
        }
        const seq = await ledgerRegistryApproval(data!.ledger, ctx, n, tool, approval, io.env);
        let repinned;
        try {
          repinned = await client.repinUpstream({ tenant, name: n, pin: approval.pin, replaces: current.pinDigest }, { ctx });
        } catch (err) {
          throw new Error(`the approval was recorded in tenant "${tenant}"'s ledger as entry ${seq}, but the registry did not take it: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
        }
        out(
          { upstream: upstreamJson(repinned.upstream!), verdict: approval.diff.verdict, tools: approval.tools, ledger_seq: seq },
          `approved ${what} (${approval.diff.verdict}) for tenant "${tenant}", pinned in the registry; recorded in the tenant's audit ledger as entry ${seq}\n${formatDiff(approval.diff)}\n`,
        );
      };
    } else {
      const n = name();
      act = async ({ client, data }) => {
        if (!data) throw new Error(`${command} needs the tenant's ledger, where the change is recorded: run it against a running server or a cluster (--admin-addr with LEDGER_ADDR …)`);
        const changed =
          command === "remove"
            ? (await client.removeUpstream({ tenant, name: n }, { ctx })).upstream!
            : (await client.setUpstreamStatus({ tenant, name: n, status: command === "disable" ? UpstreamStatus.DISABLED : UpstreamStatus.ENABLED }, { ctx })).upstream!;
        const type = command === "remove" ? "upstream.removed" : command === "disable" ? "upstream.disabled" : "upstream.enabled";
        const seq = await ledgerUpstreamChange(data.ledger, ctx, type, changed);
        out({ upstream: upstreamJson(changed), ledger_seq: seq }, `upstream "${n}" of tenant "${tenant}" ${command === "remove" ? "removed with its pin" : `${command}d`} (ledger entry ${seq})\n`);
      };
    }

    const admin = await openAdmin(values, env);
    try {
      await act(admin);
    } finally {
      await admin.close();
    }
    return 0;
  } catch (err) {
    if (err instanceof UsageError) {
      io.stderr.write(`chaos-core upstreams: ${err.message}\n${usage}\n`);
      return 2;
    }
    const message = err instanceof Error ? err.message : String(err);
    io.stderr.write(`chaos-core upstreams: ${message}\n`);
    if (json) io.stdout.write(`${JSON.stringify({ error: message })}\n`);
    return 1;
  }
}
