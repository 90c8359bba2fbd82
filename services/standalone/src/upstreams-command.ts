import { existsSync } from "node:fs";
import { readFile, writeFile } from "node:fs/promises";
import type { JsonObject } from "@bufbuild/protobuf";
import { diffContracts, formatDiff, parseUpstreamsLock, serializeUpstreamsLock, type ContractSet } from "@chaos-core/contracts";
import { readUpstreamContracts, upstreamRisk, upstreamToolNames } from "@chaos-core/cognition";
import { ChaosError, describeSecretRef, parseUpstreamsFile, type Env, type UpstreamDeclaration } from "@chaos-core/kit";
import { parseCommandLine, unknownCommand, UsageError } from "./command-line.js";
import { loadUpstreamsConfig, resolveDataDir, type UpstreamsConfig } from "./config.js";
import { policyFilePath } from "./data-dir-layout.js";
import { argsProblemsUnderPins } from "./policy-check-command.js";
import { appendOperatorEntries, localOperator, pinChanges } from "./upstreams-ledger.js";
import { isRegistryCommand, REGISTRY_USAGE, runRegistryUpstreamsCommand } from "./upstreams-registry-command.js";
import { approveAsOverlay, isReadOnlyError, lockReadOnly, overlayLines, overlaysOf } from "./upstreams-overlay.js";

/** Where the command writes; the process streams by default, buffers in tests. */
export interface UpstreamsCommandIo {
  stdout: { write(chunk: string): unknown };
  stderr: { write(chunk: string): unknown };
  /** The environment the files and secret references are found from. */
  env: Env;
  /** The version Chaos Core names itself with to upstreams. */
  version: string;
}

/** The help text of `chaos-core upstreams`. */
export const UPSTREAMS_USAGE = `Usage: chaos-core upstreams <command> [--upstreams FILE] [--json]

Commands:
  list         Every declared upstream: its transport, whether it is pinned, its tools
  show <name>  One upstream: its declaration (secrets as the references they are, never a value)
               and each pinned tool with its capability name, MCP tool name and risk
  lock         Connects to every declared upstream, reads its tools and pins them in
               upstreams.lock beside the file (CHAOS_CORE_UPSTREAMS_LOCK to put it elsewhere):
               nothing of an upstream is offered before it is pinned. [--check: change nothing;
               exit 1 when a live upstream no longer matches its pin, naming the verdicts]
  diff <name>  The verdicts between an upstream's pin and what it lists now (COSMETIC, SAFE,
               RISKY, BREAKING), per tool and section; with the overlays in force (below) where the
               lock is read-only, or with --overlay or a registry flag
  approve <name> [<tool>]
               Pins what the upstream lists now — one tool, or all of it — in upstreams.lock, after
               reviewing the diff: a tool quarantined for a changed definition is served again,
               at once by a running server (a tool new since the last start, from its next start)
               Where the lock cannot be written (a read-only mount such as a Kubernetes ConfigMap,
               EROFS, EACCES, EPERM), or with --overlay, the approval is recorded as an overlay in
               the tenant registry instead (tenant default; --admin-addr, --database-url or
               --data-dir, as for chaos-core tenants): every serving process serves it over the
               lock until the lock is updated (chaos-core upstreams lock where it is kept)

Before they write the lock, lock and approve warn of each rule of the data directory's policy.json
whose condition reads an argument none of the tools it names declares under the new pins.
lock and approve record what they change in the audit ledger before they write the lock
(upstream.pinned, upstream.approved: the upstream, each tool's new digest, and the OS user who ran
it), through the running server on the data directory or, when none runs, on its stores; an
overlay's upstream.approved (overlay: true) goes to the cluster's ledger with --admin-addr and
LEDGER_ADDR, before the overlay is recorded.

The upstreams file is --upstreams, else CHAOS_CORE_UPSTREAMS_FILE, else upstreams.json in the data
directory (docs/federation.md). Secret references resolve from CHAOS_CORE_UPSTREAM_SECRET_*
variables and CHAOS_CORE_UPSTREAM_SECRETS_DIR. Exits 0 when done, 1 when refused or a pin does
not match, 2 on a usage error.

${REGISTRY_USAGE}`;

const COMMANDS = ["list", "show", "lock", "diff", "approve"] as const;

async function declarations(config: UpstreamsConfig): Promise<UpstreamDeclaration[]> {
  if (!existsSync(config.file)) {
    if (config.fileChosen) throw new ChaosError("failed_precondition", `${config.file}: no such upstreams file`);
    return [];
  }
  return parseUpstreamsFile(await readFile(config.file, "utf8"), config.file);
}

async function pins(config: UpstreamsConfig): Promise<Map<string, ContractSet>> {
  if (!existsSync(config.lock)) return new Map();
  return parseUpstreamsLock(await readFile(config.lock, "utf8"), config.lock);
}

function declared(all: readonly UpstreamDeclaration[], name: string | undefined): UpstreamDeclaration {
  if (name === undefined) throw new UsageError("name the upstream");
  const found = all.find((u) => u.name === name);
  if (!found) throw new ChaosError("not_found", `no upstream "${name}" is declared${all.length > 0 ? ` (declared: ${all.map((u) => u.name).join(", ")})` : ""}`);
  return found;
}

/** A declaration as it may be shown: every secret as its reference. */
function shownDeclaration(u: UpstreamDeclaration): Record<string, unknown> {
  if (u.transport === "http") {
    return { ...u, headers: Object.fromEntries(Object.entries(u.headers).map(([k, ref]) => [k, describeSecretRef(ref)])) };
  }
  return { ...u, env: Object.fromEntries(Object.entries(u.env).map(([k, v]) => [k, typeof v === "string" ? v : describeSecretRef(v)])) };
}

/** A pinned upstream's tools with the names and risk Chaos Core serves them under. */
function pinnedTools(u: UpstreamDeclaration, pin: ContractSet) {
  const names = upstreamToolNames(u.name, Object.keys(pin.tools));
  return names.map((n) => {
    const behavior = pin.tools[n.tool]!.behavior;
    return { tool: n.tool, capability: n.capability, mcp_name: n.mcpName, risk: upstreamRisk(u, n.tool, behavior) };
  });
}

/** Runs `chaos-core upstreams …`; resolves with the exit code. */
export async function runUpstreamsCommand(args: string[], io: UpstreamsCommandIo): Promise<number> {
  const [command, ...rest] = args;
  if (command === undefined || command === "help" || command === "--help" || command === "-h") {
    io.stdout.write(`${UPSTREAMS_USAGE}\n`);
    return command === undefined ? 2 : 0;
  }
  // A tenant's upstreams live in the registry (upstreams-registry-command.ts); the file's stay here.
  if (isRegistryCommand(command, rest)) return runRegistryUpstreamsCommand(args, io, UPSTREAMS_USAGE);
  try {
    if (!(COMMANDS as readonly string[]).includes(command)) throw unknownCommand("upstreams command", command, [...COMMANDS, "add", "remove", "disable", "enable"]);
    const { values, positionals } = parseCommandLine(
      rest,
      {
        upstreams: { type: "string" },
        json: { type: "boolean" },
        check: { type: "boolean" },
        overlay: { type: "boolean" },
        "admin-addr": { type: "string" },
        "database-url": { type: "string" },
        "data-dir": { type: "string" },
      },
      { positionals: true },
    );
    // Where the registry is, for an overlay (as chaos-core tenants finds it).
    const where = { "admin-addr": values["admin-addr"], "database-url": values["database-url"], "data-dir": values["data-dir"] };
    const registryNamed = Object.values(where).some((v) => v !== undefined);
    const env = values.upstreams ? { ...io.env, CHAOS_CORE_UPSTREAMS_FILE: values.upstreams } : io.env;
    const config = loadUpstreamsConfig(env);
    const all = await declarations(config);
    const out = (json: unknown, text: string) => io.stdout.write(values.json ? `${JSON.stringify(json)}\n` : text);
    const connect = { secrets: config.secrets, workDir: config.workDir, version: io.version };
    // An administrative change is in the ledger before it takes effect; one that cannot be recorded is not made.
    const recorded = (entries: readonly JsonObject[]) =>
      appendOperatorEntries(env, entries, resolveDataDir(env), (line) => io.stderr.write(`chaos-core: ${line}\n`)).catch((err: unknown) => {
        throw new ChaosError("unavailable", `the audit ledger could not record the change, so ${config.lock} was not written: ${err instanceof Error ? err.message : String(err)}`);
      });
    // Said before re-pinning: a rule of the policy that reads an argument the new pins would not declare.
    const warnOfRules = async (next: ReadonlyMap<string, ContractSet>) => {
      for (const problem of await argsProblemsUnderPins(policyFilePath(resolveDataDir(env)), all, next)) {
        io.stderr.write(`chaos-core: warning: under the new pins, ${problem}; its calls fail closed until the policy is fixed\n`);
      }
    };
    switch (command) {
      case "list": {
        const pinned = await pins(config);
        const rows = all.map((u) => ({ name: u.name, transport: u.transport, disabled: u.disabled, pinned: pinned.has(u.name), tools: pinned.get(u.name) ? Object.keys(pinned.get(u.name)!.tools).length : 0 }));
        out(
          { file: config.file, lock: config.lock, upstreams: rows },
          rows.length === 0
            ? `no upstream is declared in ${config.file}\n`
            : rows.map((r) => `${r.name}\t${r.transport}\t${r.pinned ? `pinned, ${r.tools} tools` : "not pinned (chaos-core upstreams lock)"}${r.disabled ? "\tdisabled" : ""}\n`).join(""),
        );
        return 0;
      }
      case "show": {
        const u = declared(all, positionals[0]);
        const pin = (await pins(config)).get(u.name);
        const tools = pin ? pinnedTools(u, pin) : [];
        out(
          { declaration: shownDeclaration(u), pinned: pin !== undefined, tools },
          `${JSON.stringify(shownDeclaration(u), null, 2)}\n${pin ? tools.map((t) => `${t.mcp_name}\t${t.capability}\trisk ${t.risk}\n`).join("") : "not pinned (chaos-core upstreams lock)\n"}`,
        );
        return 0;
      }
      case "lock": {
        const before = await pins(config);
        const live = new Map<string, ContractSet>();
        for (const u of all) {
          if (u.disabled) continue;
          io.stderr.write(`chaos-core: reading the tools of upstream "${u.name}" (${u.transport})\n`);
          live.set(u.name, await readUpstreamContracts(u, connect));
        }
        if (values.check) {
          let changed = false;
          for (const [name, set] of live) {
            const pinned = before.get(name);
            const diff = pinned ? diffContracts(pinned, set) : undefined;
            if (!pinned) io.stdout.write(`${name}: not pinned\n`);
            else if (diff && diff.changes.length > 0) io.stdout.write(`${name}: ${diff.verdict}\n${formatDiff(diff)}\n`);
            changed ||= !pinned || (diff !== undefined && diff.changes.length > 0);
          }
          if (!changed) io.stdout.write(`${config.lock} matches every upstream\n`);
          return changed ? 1 : 0;
        }
        const by = localOperator(io.env);
        const empty: ContractSet = { tools: {}, prompts: {}, resources: {}, capabilities: {} };
        const entries = [...new Set([...before.keys(), ...live.keys()])].sort().flatMap((name) => {
          const tools = pinChanges(before.get(name), live.get(name));
          if (tools.length === 0) return [];
          const verdict = diffContracts(before.get(name) ?? empty, live.get(name) ?? empty).verdict;
          return [{ type: "upstream.pinned", upstream: name, ...(verdict !== "NONE" ? { verdict } : {}), tools: tools.map((t) => ({ ...t })), by }];
        });
        await warnOfRules(live);
        const seqs = await recorded(entries);
        await writeFile(config.lock, serializeUpstreamsLock(live));
        if (seqs.length > 0) io.stdout.write(`recorded in the audit ledger (tenant default): ${entries.map((e, i) => `${e.upstream} as entry ${seqs[i]}`).join(", ")}\n`);
        io.stdout.write(`wrote ${config.lock} (${[...live].map(([n, s]) => `${n}: ${Object.keys(s.tools).length} tools`).join(", ") || "no upstream"})\n`);
        return 0;
      }
      case "approve": {
        const u = declared(all, positionals[0]);
        const tool = positionals[1];
        const current = await pins(config);
        const readOnly = values.overlay ? undefined : await lockReadOnly(config.lock);
        const pinned = current.get(u.name) ?? { tools: {}, prompts: {}, resources: {}, capabilities: {} };
        const live = await readUpstreamContracts(u, connect);
        const say = (line: string) => io.stderr.write(`chaos-core: ${line}\n`);
        const asOverlay = (why: string, lock: ReadonlyMap<string, ContractSet>) =>
          approveAsOverlay({ upstream: u.name, ...(tool !== undefined ? { tool } : {}), lock, live, why, lockFile: config.lock }, where, env, say);
        if (values.overlay || readOnly) {
          io.stdout.write(await asOverlay(values.overlay ? "--overlay" : `the lock is read-only here: ${readOnly}`, current));
          return 0;
        }
        let next: ContractSet;
        if (tool === undefined) next = live;
        else {
          if (!live.tools[tool] && !pinned.tools[tool]) throw new ChaosError("not_found", `upstream "${u.name}" lists no tool "${tool}", and none is pinned`);
          const tools = { ...pinned.tools };
          if (live.tools[tool]) tools[tool] = live.tools[tool];
          else delete tools[tool];
          next = { ...pinned, tools };
        }
        const diff = diffContracts(pinned, next);
        const tools = pinChanges(pinned, next);
        if (diff.changes.length === 0 || tools.length === 0) {
          io.stdout.write(`${u.name}${tool ? `/${tool}` : ""}: the pin already matches; nothing changed\n`);
          return 0;
        }
        await warnOfRules(new Map([...current, [u.name, next]]));
        const [seq] = await recorded([
          { type: "upstream.approved", upstream: u.name, ...(tool ? { tool } : {}), verdict: diff.verdict, tools: tools.map((t) => ({ ...t })), by: localOperator(io.env) },
        ]);
        const lock = new Map(current);
        current.set(u.name, next);
        try {
          await writeFile(config.lock, serializeUpstreamsLock(current));
        } catch (err) {
          if (!isReadOnlyError(err)) throw err;
          const code = (err as NodeJS.ErrnoException).code;
          say(`${config.lock} could not be written (${code}): ledger entry ${seq} records an approval the lock did not take; recording it as an overlay instead`);
          io.stdout.write(await asOverlay(`writing the lock failed (${code})`, lock));
          return 0;
        }
        io.stdout.write(`approved ${u.name}${tool ? `/${tool}` : ""} (${diff.verdict}), pinned in ${config.lock}; recorded in the audit ledger as entry ${seq}\n${formatDiff(diff)}\n`);
        return 0;
      }
      case "diff": {
        const u = declared(all, positionals[0]);
        const lock = await pins(config);
        // Where the lock is read-only, what is served is the lock with the registry's overlays in force.
        const overlaid = values.overlay || registryNamed || (await lockReadOnly(config.lock)) !== undefined ? await overlaysOf(where, env, lock, u.name) : undefined;
        const pinned = (overlaid?.pins ?? lock).get(u.name);
        if (!pinned) throw new ChaosError("failed_precondition", `upstream "${u.name}" is not pinned: run chaos-core upstreams lock`);
        const diff = diffContracts(pinned, await readUpstreamContracts(u, connect));
        const since = overlaid?.outcomes.some((o) => o.state === "in-force") ? "it was pinned and approved" : "it was pinned";
        out(
          overlaid ? { ...diff, overlays: overlaid.outcomes } : diff,
          `${overlaid ? overlayLines(overlaid.outcomes) : ""}${diff.changes.length === 0 ? `${u.name}: no change since ${since}\n` : `${u.name}: ${diff.verdict}\n${formatDiff(diff)}\n`}`,
        );
        return 0;
      }
    }
    return 2;
  } catch (err) {
    if (err instanceof UsageError) {
      io.stderr.write(`chaos-core upstreams: ${err.message}\n${UPSTREAMS_USAGE}\n`);
      return 2;
    }
    io.stderr.write(`chaos-core upstreams: ${err instanceof Error ? err.message : String(err)}\n`);
    return 1;
  }
}
