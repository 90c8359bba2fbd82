import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import { once } from "node:events";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { timestampDate } from "@bufbuild/protobuf/wkt";
import { z } from "zod";
import { ChaosError, type CallContext, type ErrorCode, type Logger, type ServiceClient } from "@chaos-core/kit";
import { ApprovalChannel, type CognitionService } from "@chaos-core/proto/gen/chaoscore/cognition/v1/cognition_pb.js";
import { CouncilService } from "@chaos-core/proto/gen/chaoscore/council/v1/council_pb.js";
import { LedgerService } from "@chaos-core/proto/gen/chaoscore/ledger/v1/ledger_pb.js";
import { MemoryService } from "@chaos-core/proto/gen/chaoscore/memory/v1/memory_pb.js";
import { PolicyService } from "@chaos-core/proto/gen/chaoscore/policy/v1/policy_pb.js";
import { UpstreamApprovalService } from "@chaos-core/proto/gen/chaoscore/policy/v1/upstream_approvals_pb.js";
import { TenantAdminService } from "@chaos-core/proto/gen/chaoscore/admin/v1/admin_pb.js";
import type { SignInLinks } from "@chaos-core/edge/stdio";
import { ADMIN_FILE, type AdminFile } from "./admin-client.js";
import { ADMIN_RPC_PREFIX, answerAdminRpc, type BridgedService } from "./admin-rpc.js";
import { removeIfOurs, writePrivateFile } from "./private-file.js";

/** The policy package, loaded on the first policy request: the endpoint starts before the services load. */
const loadPolicyModule = () => import("@chaos-core/policy");
/** The edge's text of a spend request, loaded on the first listing (stdio has it loaded already). */
const loadEdgeModule = () => import("@chaos-core/edge/stdio");

/** The principal every operator answer is recorded under: never the agent's (no self-approval). */
export const OPERATOR_PRINCIPAL = "operator";

export interface AdminServerOptions {
  /** The data directory `admin.json` is written to (and removed from on close). */
  readonly dataDir: string;
  readonly cognition: ServiceClient<typeof CognitionService>;
  readonly ledger: ServiceClient<typeof LedgerService>;
  /** The capability policy, read and stored through the same RPCs as any caller (`chaos-core policy`). */
  readonly policy: ServiceClient<typeof PolicyService>;
  /** The tenant registry's admin API (`chaos-core tenants`, `chaos-core keys`), served as JSON RPCs. */
  readonly tenantAdmin: ServiceClient<typeof TenantAdminService>;
  /** The operator's approvals where the upstreams lock is read-only (`chaos-core upstreams approve --overlay`), served as JSON RPCs. */
  readonly upstreamApprovals?: ServiceClient<typeof UpstreamApprovalService>;
  /** Memory and council, for a tenant's export, deletion and retention (`chaos-core tenants export|delete|retention`). */
  readonly memory: ServiceClient<typeof MemoryService>;
  readonly council: ServiceClient<typeof CouncilService>;
  /**
   * A tenant's ledger as export JSONL lines (the store's `exportLedger`): the running process
   * holds the data directory, so `chaos-core ledger export|verify` reads it through here.
   */
  readonly exportLedger: (tenant: string) => AsyncIterable<string>;
  readonly logger: Logger;
  /**
   * The approval console's one-time sign-in links, shared with the console this process serves
   * (`chaos-core approvals console`); absent when the console is off.
   */
  readonly signInLinks?: SignInLinks;
}

export interface RunningAdminServer {
  readonly url: string;
  readonly token: string;
  /** The path of the `admin.json` written. */
  readonly file: string;
  /**
   * Names the approval console once it serves (`chaos-core serve`: on the MCP listener; `stdio`:
   * on its own loopback listener): sign-in links are built from it and `admin.json` gains
   * `console_url`.
   */
  setConsoleUrl(url: string): Promise<void>;
  /** Stops listening and removes `admin.json` (if it is still this server's). */
  close(): Promise<void>;
}

/** Largest request body accepted. */
const MAX_BODY_BYTES = 16 * 1024;
/** Largest policy document accepted (a long host list is still far below it). */
const MAX_POLICY_BYTES = 1024 * 1024;
/** Largest bridged RPC request: a large upstream's pin (AddUpstream), as gRPC's default message limit. */
const MAX_RPC_BYTES = 4 * 1024 * 1024;

const tenantField = z
  .string()
  .regex(/^[a-z0-9][a-z0-9_-]{0,62}$/, "must be a tenant id (lowercase letters, digits, - and _, at most 63)")
  .default("default");

const resolveBody = z.strictObject({
  approval_id: z.string().regex(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/, "must be an approval id (a UUID)"),
  approve: z.boolean(),
  tenant: tenantField,
});

const requestSeqField = z.number().int().positive().max(Number.MAX_SAFE_INTEGER);

const spendBody = z.strictObject({
  request_seq: requestSeqField,
  tenant: tenantField,
  ttl_seconds: z.number().int().min(1).max(3600).optional(),
});

const declineBody = z.strictObject({
  request_seq: requestSeqField,
  tenant: tenantField,
  reason: z.string().max(500, "at most 500 characters").optional(),
});

const tenantQuery = z.strictObject({ tenant: tenantField });

const signInLinkBody = z.strictObject({ tenant: tenantField });

const policyBody = z.strictObject({
  tenant: tenantField,
  document: z.record(z.string(), z.unknown()),
  expected_version: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER).optional(),
});

const listQuery = z.strictObject({
  tenant: tenantField,
  limit: z
    .string()
    .regex(/^[0-9]{1,3}$/, "must be a whole number from 1 to 500")
    .transform(Number)
    .pipe(z.number().int().min(1, "must be from 1 to 500").max(500, "must be from 1 to 500"))
    .default(100),
});

const STATUS: Partial<Record<ErrorCode, number>> = {
  invalid_argument: 400,
  unauthenticated: 401,
  permission_denied: 403,
  policy_denied: 403,
  not_found: 404,
  already_exists: 409,
  failed_precondition: 409,
  approval_required: 409,
  conflict: 409,
  resource_exhausted: 429,
  unavailable: 503,
  deadline_exceeded: 504,
};

class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

/** Parses with a schema; a failure is a 400 naming the first bad field. */
function parse<T extends z.ZodType>(schema: T, value: unknown, where: string): z.output<T> {
  const result = schema.safeParse(value);
  if (result.success) return result.data;
  const issue = result.error.issues[0]!;
  const field = issue.path.length > 0 ? issue.path.join(".") : where;
  const message = issue.code === "unrecognized_keys" ? `unknown field(s) ${issue.keys.join(", ")}` : issue.message;
  throw new HttpError(400, "invalid_argument", `${field}: ${message}`);
}

function send(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { "content-type": "application/json", "cache-control": "no-store", "content-length": Buffer.byteLength(text) });
  res.end(text);
}

async function readJson(req: IncomingMessage, maxBytes = MAX_BODY_BYTES): Promise<unknown> {
  const type = req.headers["content-type"] ?? "";
  if (!/^application\/json\b/i.test(type)) throw new HttpError(415, "invalid_argument", "body: send Content-Type: application/json");
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > maxBytes) throw new HttpError(413, "invalid_argument", `body: larger than ${maxBytes} bytes`);
    chunks.push(chunk);
  }
  try {
    return JSON.parse(Buffer.concat(chunks).toString("utf8")) as unknown;
  } catch {
    throw new HttpError(400, "invalid_argument", "body: not valid JSON");
  }
}

const digest = (s: string) => createHash("sha256").update(s, "utf8").digest();

/** The token check, in constant time over fixed-length digests. */
function tokenMatches(header: string | undefined, token: Buffer): boolean {
  const m = /^Bearer ([A-Za-z0-9_-]{1,256})$/.exec(header ?? "");
  return m !== null && timingSafeEqual(digest(m[1]!), token);
}

function isLoopbackAddress(address: string | undefined): boolean {
  return address === "127.0.0.1" || address === "::ffff:127.0.0.1";
}

const ts = (t: Parameters<typeof timestampDate>[0] | undefined) => (t ? timestampDate(t).toISOString() : "");

/**
 * The operator's approval path in standalone: an HTTP endpoint on 127.0.0.1 (never another
 * interface), ephemeral port, guarded by a random bearer token that only `<dataDir>/admin.json`
 * (mode 0600) holds. It answers pending approvals as the principal `operator` through the same
 * RPCs the MCP tools use, so every answer is checked by cognition and the ledger (no
 * self-approval) and recorded in the ledger like any other.
 *
 * - `GET  /v1/approvals?tenant=T&limit=N` → `{approvals, spend_requests}`: pending cognition
 *   approvals and the ledger's spend requests waiting for a person, each with every argument
 *   (a spend request's `text` is what a person reads before answering)
 * - `POST /v1/approvals/resolve {approval_id, approve, tenant?}` → `{approval_id, status, resolved_by}`
 * - `POST /v1/spend/approve {request_seq, tenant?, ttl_seconds?}` → the locked gate answer, with
 *   `receipt_pending` and `requester`: the receipt goes to the requester's next call, not here
 * - `POST /v1/spend/decline {request_seq, tenant?, reason?}` → `{request_seq, ledger_seq, declined_by}`
 * - `GET  /v1/ledger/export?tenant=T` → the tenant's ledger export (JSONL, `chaos-core-ledger/1`)
 * - `GET  /v1/policy?tenant=T` → `{tenant, version, source, updated_at, document, last_error?}`
 * - `PUT  /v1/policy {document, tenant?, expected_version?}` → `{tenant, version}`: the document
 *   is validated exactly as `policy.json` is (a bad field is a 400 naming it) and stored as the
 *   next version
 * - `POST /v1/rpc/<service>/<Method>?tenant=T` → the RPC's response message as proto3 JSON
 *   (snake_case names; a server stream as NDJSON), its body the request message, called as the
 *   operator of T: the APIs a cluster serves over gRPC, for `chaos-core tenants` and `chaos-core
 *   keys` (docs/tenants.md) — TenantAdminService whole; of MemoryService and CouncilService
 *   ExportData, DeleteData and ApplyRetention; of LedgerService ExportEntries and Append; of
 *   PolicyService GetPolicy; UpstreamApprovalService whole (`chaos-core upstreams approve --overlay`)
 * - `POST /v1/console/sign-in-link {tenant?}` → `{tenant, url, expires_at}`: a one-time link that
 *   signs its opener in to the approval console as `operator` of the tenant (single use, 120 s)
 */
export async function startAdminServer(options: AdminServerOptions): Promise<RunningAdminServer> {
  const { cognition, ledger, policy, exportLedger, logger } = options;
  const bridged: BridgedService[] = [
    { service: TenantAdminService, client: options.tenantAdmin } as BridgedService,
    { service: MemoryService, client: options.memory, methods: ["ExportData", "DeleteData", "ApplyRetention"] } as BridgedService,
    { service: CouncilService, client: options.council, methods: ["ExportData", "DeleteData", "ApplyRetention"] } as BridgedService,
    { service: LedgerService, client: ledger, methods: ["ExportEntries", "Append"] } as BridgedService,
    { service: PolicyService, client: policy, methods: ["GetPolicy"] } as BridgedService,
    ...(options.upstreamApprovals ? [{ service: UpstreamApprovalService, client: options.upstreamApprovals } as BridgedService] : []),
  ];
  const token = randomBytes(32).toString("base64url");
  const tokenDigest = digest(token);
  const operator = (tenant: string): CallContext => ({ tenant, principal: OPERATOR_PRINCIPAL });
  let port = 0;
  let consoleUrl: string | undefined;

  async function route(req: IncomingMessage, res: ServerResponse): Promise<void> {
    // Bound to 127.0.0.1 only; this check stands even if that ever changed.
    if (!isLoopbackAddress(req.socket.remoteAddress)) throw new HttpError(403, "permission_denied", "the admin endpoint answers loopback only");
    // DNS rebinding: a browser page may reach 127.0.0.1 under another name, never with this Host.
    const host = req.headers.host ?? "";
    if (host !== `127.0.0.1:${port}` && host !== `localhost:${port}`) throw new HttpError(403, "permission_denied", `Host ${host} is not allowed`);
    if (!tokenMatches(req.headers.authorization, tokenDigest)) {
      res.setHeader("WWW-Authenticate", 'Bearer realm="chaos-core-admin"');
      throw new HttpError(401, "unauthenticated", `send Authorization: Bearer <token from ${ADMIN_FILE}>`);
    }
    const url = new URL(req.url ?? "/", "http://127.0.0.1");
    const endpoint = `${req.method ?? ""} ${url.pathname}`;
    if (req.method === "POST" && url.pathname.startsWith(ADMIN_RPC_PREFIX)) {
      const [serviceName, method = ""] = url.pathname.slice(ADMIN_RPC_PREFIX.length).split("/");
      const bridgedService = bridged.find((b) => b.service.typeName === serviceName);
      if (!bridgedService) throw new HttpError(404, "not_found", `no service ${serviceName ?? ""} on the admin endpoint`);
      const q = parse(tenantQuery, Object.fromEntries(url.searchParams), "query");
      // An export or a deletion may take minutes on a large tenant.
      const answer = await answerAdminRpc(bridgedService, method, await readJson(req, MAX_RPC_BYTES), { ctx: operator(q.tenant), timeoutMs: 30 * 60_000 });
      logger.info({ service: serviceName, method, tenant: q.tenant }, "operator called an admin RPC");
      if (answer.kind === "unary") return send(res, 200, answer.message);
      res.writeHead(200, { "content-type": "application/x-ndjson", "cache-control": "no-store" });
      try {
        for await (const message of answer.messages) {
          if (!res.write(`${JSON.stringify(message)}\n`)) await Promise.race([once(res, "drain"), once(res, "close")]);
          if (res.destroyed) return;
        }
      } catch (err) {
        // The status is sent: the failure is the stream's last line.
        const e = ChaosError.from(err);
        res.write(`${JSON.stringify({ error: { code: e.code, message: e.code === "internal" ? "internal error" : e.message } })}\n`);
      }
      return void res.end();
    }
    switch (endpoint) {
      case "GET /v1/approvals": {
        const q = parse(listQuery, Object.fromEntries(url.searchParams), "query");
        const listed = await cognition.listApprovals({ limit: q.limit }, { ctx: operator(q.tenant) });
        const spends = await ledger.listSpendRequests({ limit: q.limit }, { ctx: operator(q.tenant) });
        const { describeSpendRequest } = await loadEdgeModule();
        return send(res, 200, {
          tenant: q.tenant,
          spend_requests: spends.requests.map((r) => ({
            request_seq: Number(r.requestSeq),
            kind: r.kind,
            policy: r.policy,
            policy_version: r.policyVersion,
            tool: r.tool,
            arguments: r.arguments ?? {},
            action: r.action ?? {},
            args_hash: r.argsHash,
            arguments_verified: r.argumentsVerified,
            requested_by: r.requestedBy,
            requested_in_session: r.requestedInSession,
            created_at: r.createdAt,
            expires_at: r.expiresAt,
            state: r.state,
            gate: r.gate ?? {},
            content_hash: r.contentHash,
            channels: [...r.channels],
            channels_rule: r.channelsRule,
            text: describeSpendRequest(r),
          })),
          approvals: listed.approvals.map((a) => ({
            approval_id: a.approvalId,
            capability: a.capability,
            input: a.input ?? {},
            args_hash: a.argsHash,
            risk: a.risk,
            reason: a.reason,
            matched_rule: a.matchedRule,
            policy_version: Number(a.policyVersion),
            requested_by: a.requestedBy,
            requested_in_session: a.requestedInSession,
            created_at: ts(a.createdAt),
            expires_at: ts(a.expiresAt),
          })),
        });
      }
      case "POST /v1/approvals/resolve": {
        const body = parse(resolveBody, await readJson(req), "body");
        const resolved = await cognition.resolveApproval(
          { approvalId: body.approval_id, approve: body.approve, channel: ApprovalChannel.OPERATOR },
          { ctx: operator(body.tenant) },
        );
        logger.info({ approvalId: body.approval_id, tenant: body.tenant, status: resolved.status }, "operator answered an approval");
        return send(res, 200, { approval_id: body.approval_id, status: resolved.status, resolved_by: resolved.resolvedBy });
      }
      case "POST /v1/spend/approve": {
        const body = parse(spendBody, await readJson(req), "body");
        const approved = await ledger.approveSpend(
          { requestSeq: BigInt(body.request_seq), approvedVia: "operator", ttlSeconds: body.ttl_seconds ?? 0 },
          { ctx: operator(body.tenant) },
        );
        logger.info({ requestSeq: body.request_seq, tenant: body.tenant, state: approved.state }, "operator approved a spend");
        return send(res, 200, {
          request_seq: body.request_seq,
          state: approved.state,
          content_hash: approved.contentHash,
          ledger_seq: Number(approved.ledgerSeq),
          result: approved.result ?? {},
          receipt_pending: approved.receiptPending,
          channel: approved.channel,
          requester: approved.requester,
        });
      }
      case "POST /v1/spend/decline": {
        const body = parse(declineBody, await readJson(req), "body");
        const declined = await ledger.declineSpend(
          { requestSeq: BigInt(body.request_seq), approvedVia: "operator", reason: body.reason ?? "" },
          { ctx: operator(body.tenant) },
        );
        logger.info({ requestSeq: body.request_seq, tenant: body.tenant }, "operator declined a spend");
        return send(res, 200, {
          request_seq: body.request_seq,
          ledger_seq: Number(declined.ledgerSeq),
          declined_by: declined.declinedBy,
          channel: declined.channel,
        });
      }
      case "GET /v1/ledger/export": {
        const q = parse(tenantQuery, Object.fromEntries(url.searchParams), "query");
        const lines = exportLedger(q.tenant)[Symbol.asyncIterator]();
        // The first line is read before the status is sent, so a failure to read is still an error answer.
        let next = await lines.next();
        res.writeHead(200, { "content-type": "application/x-ndjson", "cache-control": "no-store" });
        while (!next.done) {
          // Respect back-pressure: an export can be far larger than memory. A client that goes
          // away never drains: stop reading the ledger then instead of waiting forever.
          if (!res.write(next.value)) await Promise.race([once(res, "drain"), once(res, "close")]);
          if (res.destroyed) {
            await lines.return?.();
            logger.info({ tenant: q.tenant }, "operator export ended by the client before its end");
            return;
          }
          next = await lines.next();
        }
        res.end();
        logger.info({ tenant: q.tenant }, "operator exported the ledger");
        return;
      }
      case "GET /v1/policy": {
        const { policyDocumentFromProto } = await loadPolicyModule();
        const q = parse(tenantQuery, Object.fromEntries(url.searchParams), "query");
        const got = await policy.getPolicy({}, { ctx: operator(q.tenant) });
        return send(res, 200, {
          tenant: q.tenant,
          version: Number(got.version),
          source: got.source,
          updated_at: ts(got.updatedAt),
          document: policyDocumentFromProto(got.document!, `the policy of tenant ${q.tenant}`),
          ...(got.lastError ? { last_error: got.lastError } : {}),
        });
      }
      case "PUT /v1/policy": {
        const { policyDocumentToProto, validatePolicyDocument } = await loadPolicyModule();
        const body = parse(policyBody, await readJson(req, MAX_POLICY_BYTES), "body");
        let document;
        try {
          document = validatePolicyDocument(body.document, "document");
        } catch (err) {
          throw new HttpError(400, "invalid_argument", (err as Error).message);
        }
        const put = await policy.putPolicy(
          { document: policyDocumentToProto(document), expectedVersion: BigInt(body.expected_version ?? 0) },
          { ctx: operator(body.tenant) },
        );
        logger.info({ tenant: body.tenant, version: Number(put.version) }, "operator stored a policy");
        return send(res, 200, { tenant: body.tenant, version: Number(put.version) });
      }
      case "POST /v1/console/sign-in-link": {
        const body = parse(signInLinkBody, await readJson(req), "body");
        if (!options.signInLinks || !consoleUrl) {
          throw new HttpError(409, "failed_precondition", "this server does not serve the approval console (CHAOS_CORE_CONSOLE=off, or it did not start)");
        }
        const link = options.signInLinks.issue(body.tenant);
        // The token is the link: it goes to the operator's terminal only, never to a log.
        logger.info({ tenant: body.tenant, expiresAt: link.expiresAt.toISOString() }, "operator asked for a console sign-in link");
        return send(res, 200, {
          tenant: body.tenant,
          url: `${consoleUrl}/sign-in/link?t=${link.token}`,
          expires_at: link.expiresAt.toISOString(),
        });
      }
      default:
        throw new HttpError(404, "not_found", `no endpoint ${endpoint}`);
    }
  }

  const server = createServer((req, res) => {
    route(req, res).catch((err: unknown) => {
      let status: number;
      let code: string;
      let message: string;
      if (err instanceof HttpError) {
        ({ status, code, message } = err);
      } else {
        const e = ChaosError.from(err);
        status = STATUS[e.code] ?? 500;
        code = e.code;
        message = status === 500 ? "internal error" : e.message;
        if (status === 500) logger.error({ err }, "admin request failed");
      }
      if (!res.headersSent) send(res, status, { error: { code, message } });
      else res.destroy();
    });
  });
  server.requestTimeout = 30_000;
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      server.off("error", reject);
      resolve();
    });
  });
  port = (server.address() as AddressInfo).port;
  const url = `http://127.0.0.1:${port}`;
  const file = join(options.dataDir, ADMIN_FILE);
  const closeServer = () =>
    new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });

  // Mode 0600: the token is never readable by others.
  const writeAdminFile = async () => {
    const content: AdminFile = { url, token, pid: process.pid, ...(consoleUrl ? { console_url: consoleUrl } : {}) };
    await writePrivateFile(file, `${JSON.stringify(content)}\n`);
  };
  try {
    await writeAdminFile();
  } catch (err) {
    await closeServer();
    throw err;
  }

  let closed = false;
  return {
    url,
    token,
    file,
    async setConsoleUrl(next) {
      consoleUrl = next;
      if (!closed) await writeAdminFile();
    },
    async close() {
      if (closed) return;
      closed = true;
      await closeServer();
      await removeIfOurs(file, token);
    },
  };
}

