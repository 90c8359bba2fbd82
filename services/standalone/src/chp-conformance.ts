import { once } from "node:events";
import { createInterface } from "node:readline";
import type { Readable, Writable } from "node:stream";
import { canonicalJson, chainHash, ChaosError, chpFloat, contentHash, isPlainObject, parseChpJson } from "@chaos-core/kit";
import { approveHuman, evaluateGate, type GateNumber, type GateResult, type SpendAction, type SpendPolicy } from "@chaos-core/ledger";

/**
 * `chaos-core chp-conformance`: the CHP conformance line protocol (DESIGN.md "CHP Profile B"),
 * so the reference conformance runner (or any harness) can check this implementation
 * byte for byte. One JSON request per stdin line, `{"op": ..., "args": {...}}`; one response
 * per stdout line, `{"ok": true, "result": ...}` or `{"ok": false, "error": "..."}`.
 *
 * Ops and their args (as the reference runner sends them):
 * - `canonical_json` `{payload}` → the canonical JSON string
 * - `content_hash` `{payload}` → hex SHA-256
 * - `chain_hash` `{prev_sig, entry}` → hex SHA-256
 * - `evaluate_gate` `{action, policy, committed_today?}` and `approve_human` (plus `approver`)
 *   → `{state, allowed, requires_human, reason, claims, content_hash, committed_delta}`,
 *   exactly the reference's result; `committed_delta` is a float (`100.0`, `0.0`).
 *
 * Requests are parsed with `parseChpJson`, so `100.0` stays a float; responses are written as
 * canonical JSON for the same reason. As in the reference adapter, `committed_today` defaults
 * to 0.0 and a policy without `version` gets `"1.0"` (the conformance harness tests gate
 * semantics; the ledger's own policies always carry a version). An unknown op answers
 * `unsupported op "x"`, which the reference runner reports as SKIP.
 */

/** The help text of `chaos-core chp-conformance`: every op and the names of its args. */
export const CHP_CONFORMANCE_USAGE = `Usage: chaos-core chp-conformance < requests.jsonl

Speaks the CHP conformance line protocol: one JSON request per stdin line,
  {"op": "<op>", "args": {...}}
and one response per stdout line, in order,
  {"ok": true, "result": ...}   or   {"ok": false, "error": "<what was wrong>"}
A blank line gets no response; the command exits 0 at the end of input.

Ops and their args:
  canonical_json  {payload}                       -> the canonical JSON text of payload
  content_hash    {payload}                       -> lowercase hex SHA-256 of that text
  chain_hash      {prev_sig, entry}               -> content_hash({"prev_sig", "entry"}); the
                                                     first prev_sig is ""
  evaluate_gate   {action, policy, committed_today?}
                                                  -> {state, allowed, requires_human, reason,
                                                     claims, content_hash, committed_delta}
  approve_human   {action, policy, committed_today?, approver}
                                                  -> the same, after a human approval by approver

action is {action, asset, notional, confidence?}; policy is {version?, max_notional, daily_cap,
hitl_threshold, min_confidence, allowed_actions?, per_asset_limits?}. committed_today defaults to
0.0 and a policy without version reads as "1.0". Numbers keep their form: 100.0 stays a float.
An unknown op answers {"ok": false, "error": "unsupported op ..."}, which a runner reports as SKIP.
`;

type Args = Record<string, unknown>;

function field(args: Args, name: string): unknown {
  if (!Object.hasOwn(args, name)) throw new ChaosError("invalid_argument", `args.${name} is required`);
  return args[name];
}

// The casts are safe: evaluateGate and approveHuman validate every field and name the bad one.
function gateInputs(args: Args): { action: SpendAction; policy: SpendPolicy; committed: GateNumber } {
  const policy = field(args, "policy");
  return {
    action: field(args, "action") as SpendAction,
    policy: (isPlainObject(policy) && !Object.hasOwn(policy, "version") ? { version: "1.0", ...policy } : policy) as SpendPolicy,
    committed: (Object.hasOwn(args, "committed_today") ? args.committed_today : 0) as GateNumber,
  };
}

/** The reference's result shape; the gate also returns failed_rules and provenance, kept internal. */
function wireResult(r: GateResult): Record<string, unknown> {
  return {
    state: r.state,
    allowed: r.allowed,
    requires_human: r.requires_human,
    reason: r.reason,
    claims: r.claims,
    content_hash: r.content_hash,
    committed_delta: chpFloat(r.committed_delta),
  };
}

const OPS: Readonly<Record<string, (args: Args) => unknown>> = {
  canonical_json: (args) => canonicalJson(field(args, "payload")),
  content_hash: (args) => contentHash(field(args, "payload")),
  chain_hash: (args) => {
    const prevSig = field(args, "prev_sig");
    if (typeof prevSig !== "string") throw new ChaosError("invalid_argument", "args.prev_sig must be a string");
    return chainHash(prevSig, field(args, "entry"));
  },
  evaluate_gate: (args) => {
    const { action, policy, committed } = gateInputs(args);
    return wireResult(evaluateGate(action, policy, committed));
  },
  approve_human: (args) => {
    const { action, policy, committed } = gateInputs(args);
    return wireResult(approveHuman(action, policy, committed, field(args, "approver") as string));
  },
};

/**
 * Answers one request line with one response line (without the newline). Never throws: a
 * malformed request or a failing op is an `ok: false` response naming what was wrong,
 * prefixed with `line N: ` when `lineNumber` is given.
 */
export function answerChpLine(line: string, lineNumber?: number): string {
  // JSON.stringify, not canonicalJson: it cannot throw (it escapes an unpaired surrogate echoed
  // from the input), so an error always gets its response line.
  const error = (message: string) => JSON.stringify({ ok: false, error: lineNumber === undefined ? message : `line ${lineNumber}: ${message}` });
  try {
    const request = parseChpJson(line);
    if (!isPlainObject(request)) throw new ChaosError("invalid_argument", 'a request is a JSON object {"op": ..., "args": {...}}');
    const { op, args } = request;
    if (typeof op !== "string") throw new ChaosError("invalid_argument", "op must be a string");
    const handler = Object.hasOwn(OPS, op) ? OPS[op] : undefined;
    if (handler === undefined) return error(`unsupported op ${JSON.stringify(op)}; supported: ${Object.keys(OPS).join(", ")}`);
    if (!isPlainObject(args)) throw new ChaosError("invalid_argument", "args must be a JSON object");
    return canonicalJson({ ok: true, result: handler(args) });
  } catch (err) {
    return error(err instanceof Error ? err.message : String(err));
  }
}

/**
 * Serves the protocol from `input` to `output` until `input` ends, one response per
 * non-blank request line, in order; resolves with the exit code (0).
 */
export async function runChpConformance(input: Readable, output: Writable): Promise<number> {
  const lines = createInterface({ input, crlfDelay: Infinity });
  let n = 0;
  for await (const line of lines) {
    n++;
    // A blank line carries no request, so it gets no response (keeps the 1:1 pairing of
    // requests and responses for a harness that ends its stream with an extra newline).
    if (line.trim() === "") continue;
    if (!output.write(`${answerChpLine(line, n)}\n`)) await once(output, "drain");
  }
  return 0;
}
