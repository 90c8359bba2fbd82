import { ADMIN_FILE, adminRequest, readAdminFile, type AdminFile } from "./admin-client.js";
import { parseCommandLine, unknownCommand, UsageError, withFlags } from "./command-line.js";
import { resolveDataDir } from "./config.js";

/** Where the command writes; the process streams by default, buffers in tests. */
export interface ApprovalsCommandIo {
  stdout: { write(chunk: string): unknown };
  stderr: { write(chunk: string): unknown };
  /** The environment the data directory is found from (the entry point hands over `process.env`). */
  env: NodeJS.ProcessEnv;
}

/** Exit code: done. */
export const EXIT_OK = 0;
/** Exit code: the server refused (the message says why), or no server is running. */
export const EXIT_FAILED = 1;
/** Exit code: the command line was wrong. */
export const EXIT_USAGE = 2;

/** The help text of `chaos-core approvals`. */
export const APPROVALS_USAGE = `Usage: chaos-core approvals <command> [--tenant <tenant>] [--data-dir <dir>] [--json]

Commands (answer as the operator, over the running server's loopback admin endpoint):
  list                          Pending approvals of the tenant, soonest to expire first: steps
                                and spend requests, each with every argument
  approve <approval_id>         Approve a pending step; the agent then runs it, once, with
                                chaoscore_execute {approval_id}
  reject <approval_id>          Reject a pending step; it never runs
  approve-spend <request_seq>   Approve a HITL_REQUIRED spend held by the ledger (the
                                request_seq evaluate_spend_gate or request_authorization gave);
                                the agent's next approve_spend {request_seq} (or the finance
                                call with the same arguments) receives the approval, once
  reject-spend <request_seq>    Decline a HITL_REQUIRED spend; it never runs
                                [--reason TEXT: why, shown to the agent]
  console                       Print a one-time link that signs you in to the approval
                                console as the operator of the tenant: open it within 120
                                seconds; it works once

The tenant defaults to "default" (the stdio and unauthenticated loopback tenant). The server
must be running (chaos-core serve or stdio) on the same data directory (--data-dir, else
CHAOS_CORE_DATA_DIR, else the per-user default every command uses, see chaos-core help): it
writes <data dir>/${ADMIN_FILE} with the endpoint and its token. Answers are recorded in the
audit ledger as the principal "operator", who can never be the requester.
Exits 0 when done, 1 when the server refused or none is running, 2 on a usage error.
`;

type Json = Record<string, unknown>;

const COMMANDS = ["list", "approve", "reject", "approve-spend", "reject-spend", "console", "help"];

async function call(admin: AdminFile, method: "GET" | "POST", path: string, body?: Json): Promise<Json> {
  const res = await adminRequest(admin, method, path, body);
  return (await res.json().catch(() => ({}))) as Json;
}

function option(values: Record<string, unknown>, name: string): string | undefined {
  const v = values[name];
  return typeof v === "string" ? v : undefined;
}

function oneArgument(positionals: string[], what: string): string {
  if (positionals.length !== 1) throw new UsageError(`expected exactly one ${what}`);
  return positionals[0]!;
}

function requestSeqArgument(positionals: string[]): string {
  const seqText = oneArgument(positionals, "request_seq");
  if (!/^[1-9][0-9]{0,15}$/.test(seqText)) throw new UsageError(`request_seq must be a positive whole number, got "${seqText}"`);
  return seqText;
}

/** A flag for the operator's next command, when the tenant is not the default one. */
function tenantFlag(tenant: unknown): string {
  return typeof tenant === "string" && tenant !== "default" ? ` --tenant ${tenant}` : "";
}

function listLines(answer: Json): string {
  const approvals = (answer.approvals ?? []) as Json[];
  const spends = (answer.spend_requests ?? []) as Json[];
  const tenant = String(answer.tenant);
  if (approvals.length === 0 && spends.length === 0) return `No pending approvals in tenant ${tenant}.\n`;
  const lines = [`${approvals.length} pending approval(s) and ${spends.length} spend request(s) in tenant ${tenant}:`];
  for (const a of approvals) {
    lines.push(
      `${String(a.approval_id)}  ${String(a.capability)}  risk ${String(a.risk)}  requested by ${String(a.requested_by)}` +
        `${a.requested_in_session ? ` (session ${String(a.requested_in_session)})` : ""}  expires ${String(a.expires_at)}`,
      `    input ${JSON.stringify(a.input)}`,
      `    args hash ${String(a.args_hash)}; ${String(a.reason)}`,
    );
  }
  for (const r of spends) {
    const seq = String(r.request_seq);
    lines.push(
      `spend request ${seq}  ${r.tool ? String(r.tool) : "spend"}  policy ${String(r.policy)}  requested by ${String(r.requested_by)}  expires ${String(r.expires_at)}`,
      // The ledger's own text of the request, every argument included, as the person must see it.
      ...String(r.text).split("\n").map((line) => `    ${line}`),
      `    approve: chaos-core approvals approve-spend ${seq}${tenantFlag(answer.tenant)}`,
      `    reject:  chaos-core approvals reject-spend ${seq}${tenantFlag(answer.tenant)}`,
    );
  }
  return `${lines.join("\n")}\n`;
}

/** Runs `chaos-core approvals …` and resolves with the exit code. */
export async function runApprovalsCommand(argv: string[], io: ApprovalsCommandIo): Promise<number> {
  const env = io.env;
  let json = false;
  try {
    const [command, ...rest] = argv;
    if (command === undefined) throw new UsageError("name a command");
    if (command === "help" || command === "--help" || command === "-h") {
      io.stdout.write(APPROVALS_USAGE);
      return EXIT_OK;
    }
    // Before the flags: a misspelt command is the problem to name, not a flag it does not take.
    if (!COMMANDS.includes(command)) throw unknownCommand("command", command, COMMANDS);
    const { values, positionals } = parseCommandLine(
      rest,
      {
        tenant: { type: "string" },
        json: { type: "boolean" },
        "ttl-seconds": { type: "string" },
        reason: { type: "string" },
        "data-dir": { type: "string" },
      },
      { positionals: true },
    );
    json = values.json === true;
    const tenant = option(values, "tenant");
    if (tenant !== undefined && !/^[a-z0-9][a-z0-9_-]{0,62}$/.test(tenant)) {
      throw new UsageError(`--tenant "${tenant}" is not a tenant id (lowercase letters, digits, - and _, at most 63)`);
    }
    const ttl = option(values, "ttl-seconds");
    if (ttl !== undefined && command !== "approve-spend") throw new UsageError("--ttl-seconds belongs to approve-spend");
    const reason = option(values, "reason");
    if (reason !== undefined && command !== "reject-spend") throw new UsageError("--reason belongs to reject-spend");
    const withTenant = tenant !== undefined ? { tenant } : {};
    const dataDir = () => resolveDataDir(withFlags(env, values, { "data-dir": "CHAOS_CORE_DATA_DIR" }).env);

    let answer: Json;
    let text: string;
    let ok = true;
    switch (command) {
      case "list": {
        if (positionals.length > 0) throw new UsageError("list takes no arguments");
        const admin = await readAdminFile(dataDir());
        answer = await call(admin, "GET", `/v1/approvals${tenant !== undefined ? `?tenant=${tenant}` : ""}`);
        text = listLines(answer);
        break;
      }
      case "approve":
      case "reject": {
        const id = oneArgument(positionals, "approval_id");
        const admin = await readAdminFile(dataDir());
        answer = await call(admin, "POST", "/v1/approvals/resolve", { approval_id: id, approve: command === "approve", ...withTenant });
        text =
          answer.status === "approved"
            ? `Approved ${id} (recorded as ${String(answer.resolved_by)}). The agent runs the step, once, with chaoscore_execute {"approval_id": "${id}"}.\n`
            : `Rejected ${id} (recorded as ${String(answer.resolved_by)}). The step will not run.\n`;
        break;
      }
      case "approve-spend": {
        const seqText = requestSeqArgument(positionals);
        if (ttl !== undefined && !/^[1-9][0-9]{0,3}$/.test(ttl)) throw new UsageError(`--ttl-seconds must be from 1 to 3600, got "${ttl}"`);
        const admin = await readAdminFile(dataDir());
        answer = await call(admin, "POST", "/v1/spend/approve", {
          request_seq: Number(seqText),
          ...withTenant,
          ...(ttl !== undefined ? { ttl_seconds: Number(ttl) } : {}),
        });
        const result = (answer.result ?? {}) as Json;
        // Recorded either way; only a LOCKED spend may run.
        ok = answer.state === "LOCKED";
        text =
          answer.state === "LOCKED"
            ? `Approved spend request ${seqText}: LOCKED in ledger entry ${String(answer.ledger_seq)}. The requester, ` +
              `${String(answer.requester)}, receives it with their next approve_spend {"request_seq": ${seqText}} ` +
              "(for a finance tool request, also by calling that tool with the same arguments), once.\n"
            : `The approval is recorded in ledger entry ${String(answer.ledger_seq)}, but the spend is ${String(answer.state)}` +
              `${typeof result.reason === "string" ? ` (${result.reason})` : ""}` +
              // The caps that blocked it, with their values: the ledger's words beside CHP's reason.
              `${typeof result.message === "string" ? `: ${result.message};` : ":"} an approval cannot override a hard rule.\n`;
        break;
      }
      case "reject-spend": {
        const seqText = requestSeqArgument(positionals);
        const admin = await readAdminFile(dataDir());
        answer = await call(admin, "POST", "/v1/spend/decline", { request_seq: Number(seqText), ...withTenant, ...(reason !== undefined ? { reason } : {}) });
        text = `Declined spend request ${seqText} (recorded in ledger entry ${String(answer.ledger_seq)} as ${String(answer.declined_by)}). It will never run.\n`;
        break;
      }
      case "console": {
        if (positionals.length > 0) throw new UsageError("console takes no arguments");
        const admin = await readAdminFile(dataDir());
        answer = await call(admin, "POST", "/v1/console/sign-in-link", withTenant);
        text =
          `Open this link within 120 seconds (until ${String(answer.expires_at)}) to sign in to the approval console ` +
          `as the operator of tenant ${String(answer.tenant)}; it works once, and only for you: do not share it.\n${String(answer.url)}\n`;
        break;
      }
      default:
        throw unknownCommand("command", command, COMMANDS);
    }
    (ok ? io.stdout : io.stderr).write(json ? `${JSON.stringify(answer)}\n` : text);
    return ok ? EXIT_OK : EXIT_FAILED;
  } catch (err) {
    if (err instanceof UsageError) {
      io.stderr.write(`chaos-core approvals: ${err.message}\n\n${APPROVALS_USAGE}`);
      return EXIT_USAGE;
    }
    const message = err instanceof Error ? err.message : String(err);
    io.stderr.write(`chaos-core approvals: ${message}\n`);
    if (json) io.stdout.write(`${JSON.stringify({ error: message })}\n`);
    return EXIT_FAILED;
  }
}
