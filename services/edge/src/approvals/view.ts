import type { Timestamp } from "@bufbuild/protobuf/wkt";
import { canonicalJson, isPlainObject, REQUEST_LABEL_PREFIX } from "@chaos-core/kit";
import type { GetApprovalResponse } from "@chaos-core/proto/gen/chaoscore/cognition/v1/cognition_pb.js";
import type { Entry, SpendRequest } from "@chaos-core/proto/gen/chaoscore/ledger/v1/ledger_pb.js";
import { isoTime } from "../clients/timestamps.js";
import { visibleJsonString, visibleText } from "./visible-text.js";

/** One leaf of a call's arguments: where it is, and what it holds. */
export interface ArgumentRow {
  /**
   * Where the leaf is: `beneficiary`, `targets[0].weight`, `headers["x-api-key"]` (a key that is
   * not a plain identifier is quoted like a value); `""` when the whole input is one leaf (a
   * scalar, `{}` or `[]`).
   */
  readonly path: string;
  /**
   * The leaf as JSON text: strings quoted (so spaces show), numbers as they are hashed (`100.0`
   * for a float read from JSON text, `100` for an integer), `true`, `null`, `{}`, `[]`. Hidden
   * characters are written as escapes; nothing is ever cut.
   */
  readonly value: string;
  /** The hidden characters escaped in the path or the value, named (`U+202E right-to-left override`); empty when none. */
  readonly escaped: readonly string[];
}

/** A fact about the request that is not one of its arguments (who asked, the policy decision). */
export interface ViewFact {
  readonly label: string;
  /** Plain text, hidden characters escaped. */
  readonly value: string;
  readonly escaped: readonly string[];
}

/**
 * A pending approval as a person reviews it, whatever shows it (a form, the operator CLI, the
 * console): pure data, built only from what the service stored and will act on, never from the
 * agent's description of it.
 */
export interface ApprovalView {
  /**
   * `step`: a cognition approval; `spend_request`: a held spend the ledger stored with its
   * arguments; `ledger_entry`: a request the audit ledger recorded (a receipt request);
   * `tool_call`: the call a tool-approval receipt binds.
   */
  readonly kind: "step" | "spend_request" | "ledger_entry" | "tool_call";
  /** The approval id, or the ledger entry's seq. */
  readonly id: string;
  /** One line naming what is asked, e.g. `Capability: http.request (risk high)`. */
  readonly title: string;
  /** What the rows are, e.g. `Input, exactly as it would run`. */
  readonly rowsTitle: string;
  /** Every leaf of the arguments, objects' keys sorted, arrays in order. */
  readonly rows: readonly ArgumentRow[];
  readonly facts: readonly ViewFact[];
  /** The hash the service binds the answer to. */
  readonly hash: { readonly label: string; readonly value: string };
}

/** A plain identifier reads as `a.b`; any other key is quoted, so `a.b` and `["a.b"]` differ. */
const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]*$/;

function leafText(value: unknown): { text: string; escaped: readonly string[] } {
  if (typeof value === "string") return visibleJsonString(value);
  // Numbers (plain, CHP floats, exact big integers, lossless-json numbers), booleans and null
  // read as the canonical JSON the hash covers; anything that is not JSON is refused there.
  return { text: canonicalJson(value), escaped: [] };
}

/**
 * Every leaf of `value`, each with its path, in a stable order (object keys sorted, arrays by
 * index), so two renderings of the same arguments are the same text whatever order the keys
 * arrived in. An empty object or array is a leaf of its own (else it would not show). Walks
 * without recursion, so deep nesting cannot overflow the stack. Nothing is cut or summarised.
 * A value that is not JSON (NaN, a Date) fails `invalid_argument`: what cannot be shown is not
 * asked about.
 */
export function argumentRows(value: unknown): ArgumentRow[] {
  const rows: ArgumentRow[] = [];
  const stack: Array<{ path: string; escaped: readonly string[]; value: unknown }> = [{ path: "", escaped: [], value }];
  while (stack.length > 0) {
    const { path, escaped, value: v } = stack.pop()!;
    const children: Array<{ path: string; escaped: readonly string[]; value: unknown }> = [];
    if (Array.isArray(v)) {
      v.forEach((item, i) => children.push({ path: `${path}[${i}]`, escaped, value: item }));
    } else if (isPlainObject(v)) {
      for (const key of Object.keys(v).sort()) {
        if (v[key] === undefined) continue;
        if (IDENTIFIER.test(key)) {
          children.push({ path: path === "" ? key : `${path}.${key}`, escaped, value: v[key] });
        } else {
          const k = visibleJsonString(key);
          children.push({ path: `${path}[${k.text}]`, escaped: [...new Set([...escaped, ...k.escaped])], value: v[key] });
        }
      }
    } else {
      const leaf = leafText(v);
      rows.push({ path, value: leaf.text, escaped: [...new Set([...escaped, ...leaf.escaped])] });
      continue;
    }
    if (children.length === 0) rows.push({ path, value: Array.isArray(v) ? "[]" : "{}", escaped });
    // Popped last-in first-out: pushed in reverse, the first child is shown first.
    for (let i = children.length - 1; i >= 0; i--) stack.push(children[i]!);
  }
  return rows;
}

function fact(label: string, value: string): ViewFact {
  const v = visibleText(value);
  return { label, value: v.text, escaped: v.escaped };
}

/**
 * What a step view is built from: cognition's `GetApprovalResponse`, or an `ApprovalSummary`
 * from `ListApprovals` (which carries `createdAt` and no `status` nor `channelsRule`).
 */
export type StepApprovalSource = Pick<
  GetApprovalResponse,
  | "approvalId"
  | "capability"
  | "input"
  | "argsHash"
  | "policyVersion"
  | "matchedRule"
  | "reason"
  | "risk"
  | "requestedBy"
  | "requestedInSession"
  | "expiresAt"
  | "channels"
> & { readonly status?: string; readonly createdAt?: Timestamp | undefined; readonly channelsRule?: string };

/**
 * Where a request was made, from its context label (docs/ledger.md): ` in session <id>` for an
 * MCP session, ` in request <ref>` for a request without one (`request:<ref>`), nothing without either.
 */
function inContext(label: string): string {
  if (label === "") return "";
  return label.startsWith(REQUEST_LABEL_PREFIX) ? ` in request ${label.slice(REQUEST_LABEL_PREFIX.length)}` : ` in session ${label}`;
}

/**
 * A step approval as cognition stored it: the exact validated input the step would run with,
 * its hash, the policy decision and who asked. The executor re-checks the hash and policy
 * version before it runs anything.
 */
export function stepApprovalView(a: StepApprovalSource): ApprovalView {
  const created = isoTime(a.createdAt);
  const expires = isoTime(a.expiresAt);
  const when = [a.status, created ? `created ${created}` : "", expires ? `expires ${expires}` : ""].filter(Boolean).join(", ");
  return {
    kind: "step",
    id: a.approvalId,
    title: `Capability: ${visibleText(a.capability).text} (risk ${visibleText(a.risk || "unspecified").text})`,
    rowsTitle: "Input, exactly as it would run",
    rows: argumentRows(a.input ?? {}),
    facts: [
      fact("Why approval is needed", `policy rule ${a.matchedRule || "(none)"}: ${a.reason} (policy version ${a.policyVersion})`),
      ...(a.channels.length > 0
        ? [fact("Who may approve it (policy's channels)", `${a.channels.join(", ")}${a.channelsRule ? ` (rule ${a.channelsRule})` : ""}`)]
        : []),
      fact("Requested by", `${a.requestedBy}${inContext(a.requestedInSession)}`),
      fact("Approval", `${a.approvalId}${when ? ` (${when})` : ""}`),
    ],
    hash: { label: "SHA-256 of the canonical input", value: a.argsHash },
  };
}

/** A request as the audit ledger recorded it (and the ledger will act on): the event, every field of it. */
export function ledgerEntryView(entry: Entry): ApprovalView {
  const type = typeof entry.event?.["type"] === "string" ? ` (${visibleText(entry.event["type"]).text})` : "";
  return {
    kind: "ledger_entry",
    id: String(entry.seq),
    title: `Ledger entry ${entry.seq}${type}`,
    rowsTitle: "The event, exactly as recorded",
    rows: argumentRows(entry.event ?? {}),
    facts: [fact("Recorded", `${entry.ts} for ${entry.principal}${inContext(entry.session)}`)],
    hash: { label: "content_hash of the event", value: entry.contentHash },
  };
}

/**
 * A held spend as the ledger stored it (and will act on): every argument of the call exactly as
 * it will run (the wire's beneficiary and memo, the amounts), who asked and until when it can be
 * answered, why the gate held it, and whether the stored arguments still hash to what the ledger
 * entry recorded.
 */
export function spendRequestView(request: SpendRequest): ApprovalView {
  const what = request.tool ? `${request.tool} under spend policy ${request.policy}` : `a spend under spend policy ${request.policy}`;
  const reason = typeof request.gate?.["reason"] === "string" ? request.gate["reason"] : "";
  return {
    kind: "spend_request",
    id: String(request.requestSeq),
    title: visibleText(`Spend request at ledger entry ${request.requestSeq} (${what}, version ${request.policyVersion}), ${request.state}`).text,
    rowsTitle: "Every argument of the call, exactly as it will run",
    rows: argumentRows(request.arguments ?? {}),
    facts: [
      fact("Requested by", `${request.requestedBy}${inContext(request.requestedInSession)} at ${request.createdAt}`),
      fact("Can be answered until", request.expiresAt),
      ...(reason ? [fact("Why a person must answer", `the spend gate held it: ${reason}`)] : []),
      ...(request.channels.length > 0
        ? [fact("Who may approve it (policy's channels)", `${request.channels.join(", ")}${request.channelsRule ? ` (rule ${request.channelsRule})` : ""}`)]
        : []),
      fact(
        "Arguments check",
        request.argumentsVerified
          ? "the arguments above hash to the args_hash the ledger entry recorded"
          : "THE ARGUMENTS ABOVE DO NOT HASH TO WHAT THE LEDGER ENTRY RECORDED: do not approve",
      ),
      fact("content_hash of the ledger entry", request.contentHash),
    ],
    hash: { label: "args_hash", value: request.argsHash },
  };
}

/** A tool call as a receipt binds it: the tool, its resource, and its arguments. */
export interface BoundToolCall {
  readonly tool: string;
  readonly resource: string;
  readonly arguments?: unknown;
}

/**
 * The call a tool-approval receipt will bind, every argument of it as it will run, beside the
 * request the ledger recorded for it (`request`: its `tool_approval.evaluated` entry, whose
 * args_hash the ledger checks the call against before it signs).
 */
export function toolCallView(call: BoundToolCall, request: Entry): ApprovalView {
  const recorded = request.event ?? {};
  const risk = typeof recorded["risk"] === "string" ? recorded["risk"] : "unspecified";
  return {
    kind: "tool_call",
    id: String(request.seq),
    title: visibleText(`Tool call ${call.tool} on ${call.resource} (risk ${risk}), requested in ledger entry ${request.seq}`).text,
    rowsTitle: "Every argument of the call, exactly as the receipt binds it",
    rows: argumentRows(call.arguments ?? {}),
    facts: [
      fact("Tool", call.tool),
      fact("Resource", call.resource),
      fact("Requested by", `${request.principal}${inContext(request.session)} at ${request.ts}`),
    ],
    hash: { label: "args_hash the ledger recorded for the request", value: typeof recorded["args_hash"] === "string" ? recorded["args_hash"] : "" },
  };
}

/**
 * The ledger's words for what decided a gate result (`message`: the caps a BLOCKED decision broke,
 * or the threshold that holds it for a person, with their values and the policy), or undefined.
 * CHP's `reason` is shown as it is beside them: it is normative, and hashed.
 */
export function decidedBy(result: Readonly<Record<string, unknown>> | undefined): string | undefined {
  const message = result?.["message"];
  return typeof message === "string" && message !== "" ? message : undefined;
}
