import { ChaosError } from "@chaos-core/kit";
import type { ElicitResult } from "@modelcontextprotocol/server";
import type { Entry } from "@chaos-core/proto/gen/chaoscore/ledger/v1/ledger_pb.js";
import { fitsForm, renderText, tooLongForForm } from "../../approvals/render-text.js";
import { ledgerEntryView } from "../../approvals/view.js";
import { isInputRequired, type ToolContext } from "../../definitions/tool.js";
import { ledgerCall, ledgerOf } from "../../definitions/ledger-access.js";

/** How a person's answer reached the ledger (`approved_via` in the ledger contract). */
export type ApprovedVia = "approver_role" | "elicitation";

/**
 * What the person answered. `confirmed` is the only answer that lets a tool ask the ledger for
 * an approval or a receipt; the others issue nothing.
 */
export type HumanAnswer =
  | { readonly answer: "confirmed"; readonly via: ApprovedVia }
  | { readonly answer: "declined" | "cancelled"; readonly via: "elicitation" };

/** What a tool needs from a person. */
export interface HumanQuestion {
  /** The tool that asks, for messages and the recorded decline. */
  readonly tool: string;
  /** The ledger sequence of the recorded request the answer is about. */
  readonly requestSeq: number;
  /** How the caller retries, e.g. `approve_spend {"request_seq": 7}`. */
  readonly retryCall: string;
  /** The confirm checkbox's title. */
  readonly confirmTitle: string;
  /**
   * Who else can answer when this client's user cannot be asked, as lines (the channels policy
   * allows that exist here, without this client's form).
   */
  readonly otherWays: string;
  /**
   * The question. Built only when a person is asked, from what the ledger recorded (and will
   * act on), never from the agent's description: an agent could describe a harmless request
   * while asking for another one.
   */
  question(): Promise<string>;
}

/**
 * Gets a person's answer, the two ways a tool may and no other: the caller's verified API key
 * holds the `approver` role (the ledger still checks that policy lets an approver answer, and
 * refuses a self-approval), or the client's user confirms with an explicit checkbox. The caller
 * asks the client only where policy accepts the client's own answer (`whyClientNotAsked`); the
 * ledger refuses it anywhere else. A flag in the tool's arguments is never an answer. A client
 * that cannot be asked, or a question too long for a form, → `approval_required` naming
 * {@link HumanQuestion.otherWays}.
 */
export async function askHuman(ctx: ToolContext, q: HumanQuestion): Promise<HumanAnswer> {
  if (ctx.roles.has("approver")) return { answer: "confirmed", via: "approver_role" };
  if (!ctx.client.formElicitation) {
    throw new ChaosError(
      "approval_required",
      `${q.tool} needs a person's decision, and this client cannot ask its user (it did not declare elicitation); this ` +
        `credential holds no approver role. Who can answer it here:\n${q.otherWays}\nNothing was approved or issued.`,
    );
  }
  const message = await q.question();
  if (!fitsForm(message)) {
    throw new ChaosError("approval_required", `${tooLongForForm(message)} Who can answer it here:\n${q.otherWays}\nNothing was approved or issued.`);
  }
  let result: ElicitResult;
  try {
    result = await ctx.ask({
      mode: "form",
      key: "confirm",
      message,
      requestedSchema: {
        type: "object",
        properties: {
          confirm: {
            type: "boolean",
            title: q.confirmTitle,
            description: "Tick only if you approve exactly what is shown above.",
            default: false,
          },
        },
        required: ["confirm"],
      },
    });
  } catch (err) {
    // A 2026-07-28 round that asks ends here; the client's retry brings the answer.
    if (err instanceof ChaosError || isInputRequired(err)) throw err;
    throw new ChaosError(
      "approval_required",
      `the person could not be asked (the client did not answer the approval request): nothing was approved or issued. Call ${q.retryCall} to ask again.`,
      { cause: err },
    );
  }
  if (result.action === "cancel") return { answer: "cancelled", via: "elicitation" };
  if (result.action === "decline") return { answer: "declined", via: "elicitation" };
  const confirm = result.content?.["confirm"];
  if (typeof confirm !== "boolean") {
    throw new ChaosError("invalid_argument", "the client's answer carried no yes/no confirm field: nothing was approved or issued");
  }
  return confirm ? { answer: "confirmed", via: "elicitation" } : { answer: "declined", via: "elicitation" };
}

/**
 * Records a person's refusal, so the audit shows the decision and not only its absence. If the
 * ledger cannot take it the call fails (closed: nothing was issued either way).
 */
export async function recordDecline(ctx: ToolContext, q: HumanQuestion): Promise<number> {
  try {
    const res = await ledgerOf(ctx).append(
      { event: { type: "human.declined", tool: q.tool, request_seq: q.requestSeq, via: "elicitation" } },
      ledgerCall(ctx),
    );
    return Number(res.entry?.seq ?? 0n);
  } catch (err) {
    const e = ChaosError.from(err);
    throw new ChaosError(e.code, `the person declined and nothing was issued, but the ledger did not record the decline: ${e.message}`, {
      cause: err,
    });
  }
}

/** Reads the entry at `seq` of the caller's tenant, or fails `not_found`. */
export async function readEntry(ctx: ToolContext, seq: number): Promise<Entry> {
  const res = await ledgerOf(ctx).listEntries({ afterSeq: BigInt(seq - 1), limit: 1 }, ledgerCall(ctx));
  const entry = res.entries[0];
  if (!entry || entry.seq !== BigInt(seq)) {
    throw new ChaosError(
      "not_found",
      `this tenant's ledger has no entry ${seq}: request_seq must be the ledger_seq a request returned (the ledger holds ${res.size} entries)`,
    );
  }
  return entry;
}

/** The recorded request, as a person reads it: who asked, when, and every field of the event as recorded. */
export function describeEntry(entry: Entry): string {
  return renderText(ledgerEntryView(entry));
}
