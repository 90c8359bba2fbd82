/**
 * The LedgerService calls a governed tool call goes through, as one helper each, for tests of
 * the ledger and of its callers (edge tools, cognition). Everything goes through a real client.
 */
import type { JsonObject } from "@bufbuild/protobuf";
import { ChaosError, type CallContext, type ServiceClient } from "@chaos-core/kit";
import type pg from "pg";
import type { LedgerService } from "@chaos-core/proto/gen/chaoscore/ledger/v1/ledger_pb.js";

/** A LedgerService client, in-process or over gRPC. */
export type LedgerClient = ServiceClient<typeof LedgerService>;

/** A tool call as LedgerService takes it. */
export interface FixtureToolCall {
  readonly tool: string;
  readonly resource: string;
  readonly arguments: JsonObject;
}

/** Call options for a principal of a tenant. */
export function as(tenant: string, principal: string, sessionId?: string): { ctx: CallContext } {
  return { ctx: { tenant, principal, ...(sessionId ? { sessionId } : {}) } };
}

/**
 * The edge's two-step approval: the requester's EvaluateToolApproval (must be RECEIPT_REQUIRED),
 * then the approver's IssueReceipt bound to that recorded request. Returns the signed receipt
 * and both ledger sequence numbers.
 */
export async function requestAndIssue(
  client: LedgerClient,
  input: {
    tenant: string;
    requester: string;
    approver: string;
    call: FixtureToolCall;
    decision?: "allow" | "deny";
    ttlSeconds?: number;
    approvedVia?: "approver_role" | "elicitation";
  },
): Promise<{ receipt: JsonObject; requestSeq: bigint; issueSeq: bigint; argsHash: string }> {
  const evaluated = await client.evaluateToolApproval({ call: input.call }, as(input.tenant, input.requester));
  if (evaluated.status !== "RECEIPT_REQUIRED") {
    throw new Error(`evaluateToolApproval: expected RECEIPT_REQUIRED, got ${evaluated.status} (${evaluated.code})`);
  }
  const issued = await client.issueReceipt(
    {
      call: input.call,
      decision: input.decision ?? "allow",
      ttlSeconds: input.ttlSeconds ?? 300,
      approvedVia: input.approvedVia ?? "approver_role",
      requestSeq: evaluated.ledgerSeq,
      reason: "test approval",
    },
    as(input.tenant, input.approver),
  );
  if (!issued.receipt) throw new Error("issueReceipt returned no receipt");
  return { receipt: issued.receipt, requestSeq: evaluated.ledgerSeq, issueSeq: issued.ledgerSeq, argsHash: evaluated.argsHash };
}

/** The event recorded at `seq` in the caller's tenant (via ListEntries), or undefined. */
export async function eventAt(client: LedgerClient, opts: { ctx: CallContext }, seq: bigint): Promise<JsonObject | undefined> {
  const res = await client.listEntries({ afterSeq: seq - 1n, limit: 1 }, opts);
  const entry = res.entries[0];
  return entry && entry.seq === seq ? entry.event : undefined;
}

/** Every event of the caller's tenant, oldest first. */
export async function allEvents(client: LedgerClient, opts: { ctx: CallContext }): Promise<JsonObject[]> {
  const out: JsonObject[] = [];
  let after = 0n;
  for (;;) {
    const res = await client.listEntries({ afterSeq: after, limit: 1000 }, opts);
    for (const e of res.entries) out.push(e.event ?? {});
    if (res.entries.length < 1000) return out;
    after = res.entries[res.entries.length - 1]!.seq;
  }
}

/** The ChaosError a call fails with; throws if it succeeds or fails with anything else. */
export async function failure(p: Promise<unknown>): Promise<ChaosError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  if (!(err instanceof ChaosError)) throw new Error(`expected a ChaosError, got ${String(err)}`);
  return err;
}

/** A tenant's committed spend total for one policy, all days, read straight from the table (as the owner). */
export async function committedInDb(admin: pg.Client, tenant: string, policy: string): Promise<number> {
  const r = await admin.query("SELECT COALESCE(sum(committed), 0)::float8 AS c FROM ledger.spend_days WHERE tenant_id = $1 AND policy_name = $2", [tenant, policy]);
  return Number((r.rows[0] as { c: number }).c);
}
