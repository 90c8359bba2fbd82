import { createCipheriv, createDecipheriv, createHash, randomBytes } from "node:crypto";
import { assertRequestRef, canonicalJson, ChaosError } from "@chaos-core/kit";
import type { MrtrKeyring } from "./keyring.js";
import { MRTR_KID_RE } from "./keyring.js";

// Sealed multi-round-trip `requestState` (docs/protocol.md §7): the client holds it between the
// round that asked and the retry that answers, so it is attacker-controlled input. Sealed with
// AES-256-GCM under the operator's keyring (encrypted, not only signed: the client cannot read
// the approval ids, flow ids or principals inside, nor come to depend on them) and bound to the
// tenant, principal, method, target and arguments of the call that asked. Pure functions: the
// clock is a parameter and nothing here keeps state; single use is the ledger's
// (`ConsumeRequestState`).

/** The wire version prefix: `cc1.<kid>.<base64url(iv ‖ ciphertext ‖ tag)>`. */
export const REQUEST_STATE_PREFIX = "cc1";

/** The payload version inside the ciphertext. */
export const REQUEST_STATE_VERSION = 1;

/** The methods the 2026-07-28 revision allows an `input_required` result on. */
export const MRTR_METHODS = ["tools/call", "prompts/get", "resources/read"] as const;
export type MrtrMethod = (typeof MRTR_METHODS)[number];

/** `CHAOS_CORE_MRTR_TTL_SECONDS` by default (today's elicitation timeout) and at most. */
export const DEFAULT_REQUEST_STATE_TTL_SECONDS = 600;
export const MAX_REQUEST_STATE_TTL_SECONDS = 3600;

/** The longest state {@link openRequestState} reads; anything longer is `malformed` unread. */
export const MAX_REQUEST_STATE_CHARS = 8192;

/** The largest payload {@link sealRequestState} seals (JSON bytes), so a state stays well under the limit above. */
export const MAX_REQUEST_STATE_PAYLOAD_BYTES = 4096;

/**
 * Why a state was refused, one distinct reason per check, in the order they run:
 * - `malformed`: not `cc1.<kid>.<base64url>`, too long, too short to hold an IV and a tag, not
 *   canonical base64url, or (after the tag verified) a payload without its fields;
 * - `unknown_kid`: a kid the keyring does not hold (never was, or rotated out);
 * - `tag`: the GCM tag does not verify (a changed byte, a truncation, another key);
 * - `version`: a payload version this edge does not read;
 * - `tenant`, `principal`: sealed for another tenant or principal than the caller's;
 * - `expired`: `exp` is not after now;
 * - `method`: sealed for another MCP method;
 * - `name`, `digest`: sealed for another tool/prompt/URI, or other arguments (checked where the
 *   call's params are known: {@link checkRequestStateTarget}).
 */
export const REQUEST_STATE_REFUSAL_REASONS = [
  "malformed",
  "unknown_kid",
  "tag",
  "version",
  "tenant",
  "principal",
  "expired",
  "method",
  "name",
  "digest",
] as const;
export type RequestStateRefusalReason = (typeof REQUEST_STATE_REFUSAL_REASONS)[number];

/** A JSON value a tool may keep in its state (`approval_id`, `q`, …). */
export type StateFieldValue = string | number | boolean | null;

/** The fields every payload carries; tools add their own beside them. */
const CORE_FIELDS = ["v", "tenant", "principal", "m", "n", "d", "flow", "jti", "iat", "exp", "phase"] as const;

/**
 * What a sealed state holds (JSON inside the ciphertext). `iat`/`exp` are milliseconds since the
 * epoch; `d` is the lowercase hex SHA-256 of the arguments' canonical JSON ({@link argumentsDigest});
 * `flow` is the requestRef of the flow's first round; `jti` 128 random bits, base64url, the
 * single-use handle the ledger consumes.
 */
export interface RequestStatePayload {
  readonly v: typeof REQUEST_STATE_VERSION;
  readonly tenant: string;
  readonly principal: string;
  readonly m: MrtrMethod;
  readonly n: string;
  readonly d: string;
  readonly flow: string;
  readonly jti: string;
  readonly iat: number;
  readonly exp: number;
  readonly phase: string;
  /** The tool's own fields (e.g. `approval_id`, `q`). */
  readonly [field: string]: StateFieldValue;
}

/** What the round that asks knows about its call. */
export interface SealInput {
  readonly tenant: string;
  readonly principal: string;
  readonly method: MrtrMethod;
  /** The tool or prompt name, or the resource URI. */
  readonly name: string;
  /** {@link argumentsDigest} of the call's arguments. */
  readonly digest: string;
  /** The flow id: the requestRef of round 1, carried by every later round. */
  readonly flow: string;
  /** Which question the state answers (e.g. `form`, `console`). */
  readonly phase: string;
  /** The tool's own fields; a core field's name is refused. */
  readonly fields?: Readonly<Record<string, StateFieldValue>>;
}

/** How long a state lives, and the clock. */
export interface SealOptions {
  /** 1..{@link MAX_REQUEST_STATE_TTL_SECONDS} (`CHAOS_CORE_MRTR_TTL_SECONDS`). */
  readonly ttlSeconds: number;
  /** Milliseconds since the epoch; `Date.now` when omitted. */
  readonly now?: () => number;
}

/** What the retry is checked against: the caller's identity and method, and (when known) its target. */
export interface OpenExpectation {
  readonly tenant: string;
  readonly principal: string;
  readonly method: string;
  /** The tool/prompt/URI of this retry; checked when given. */
  readonly name?: string;
  /** {@link argumentsDigest} of this retry's arguments; checked when given. */
  readonly digest?: string;
}

/** A refused state: why, in words for the log, and what the state said when that can be trusted. */
export interface RequestStateRefusal {
  readonly ok: false;
  readonly reason: RequestStateRefusalReason;
  readonly problem: string;
  /** The kid, when the state was shaped well enough to name one. */
  readonly kid?: string;
  /**
   * The state's `jti`, `flow` and `n`, only when the tag verified and the state belongs to the
   * caller's tenant and principal (never another tenant's handles into this one's records).
   */
  readonly jti?: string;
  readonly flow?: string;
  readonly name?: string;
}

export type OpenResult = { readonly ok: true; readonly kid: string; readonly payload: RequestStatePayload } | RequestStateRefusal;

const IV_BYTES = 12;
const TAG_BYTES = 16;
const B64URL_RE = /^[A-Za-z0-9_-]+$/;
const DIGEST_RE = /^[0-9a-f]{64}$/;
const MAX_NAME_CHARS = 2048;

/** The associated data of every seal: the version and the kid, so neither can be swapped. */
function aadOf(kid: string): Buffer {
  return Buffer.from(`chaos-core/mrtr/v1|${kid}`, "utf8");
}

/** Lowercase hex SHA-256 of the canonical JSON of a call's arguments (absent arguments are `{}`). */
export function argumentsDigest(args: unknown): string {
  return createHash("sha256")
    .update(canonicalJson(args ?? {}), "utf8")
    .digest("hex");
}

function isMethod(m: unknown): m is MrtrMethod {
  return typeof m === "string" && (MRTR_METHODS as readonly string[]).includes(m);
}

function invalid(problem: string): ChaosError {
  return new ChaosError("invalid_argument", `requestState: ${problem}`);
}

/**
 * Seals a state for the retry of this call, with the keyring's active kid and a fresh 96-bit IV
 * and `jti`. Returns the wire string and the payload it holds.
 * @throws ChaosError `invalid_argument` for a bad input (a core field among `fields`, a TTL out of
 *   range, a payload over {@link MAX_REQUEST_STATE_PAYLOAD_BYTES}); `failed_precondition` when the
 *   active kid has no key.
 */
export function sealRequestState(keyring: MrtrKeyring, input: SealInput, options: SealOptions): { state: string; payload: RequestStatePayload } {
  const { ttlSeconds } = options;
  if (!Number.isInteger(ttlSeconds) || ttlSeconds < 1 || ttlSeconds > MAX_REQUEST_STATE_TTL_SECONDS) {
    throw invalid(`ttlSeconds must be a whole number from 1 to ${MAX_REQUEST_STATE_TTL_SECONDS}`);
  }
  if (!input.tenant || !input.principal) throw invalid("tenant and principal are required");
  if (!isMethod(input.method)) throw invalid(`method must be one of ${MRTR_METHODS.join(", ")}`);
  if (!input.name || input.name.length > MAX_NAME_CHARS) throw invalid(`name must be 1 to ${MAX_NAME_CHARS} characters`);
  if (!DIGEST_RE.test(input.digest)) throw invalid("digest must be a lowercase hex SHA-256 (argumentsDigest)");
  assertRequestRef(input.flow);
  if (!input.phase) throw invalid("phase is required");
  const fields = input.fields ?? {};
  for (const [key, value] of Object.entries(fields)) {
    if ((CORE_FIELDS as readonly string[]).includes(key)) throw invalid(`fields.${key}: is a field of the state itself`);
    const ok = value === null || typeof value === "string" || typeof value === "boolean" || (typeof value === "number" && Number.isFinite(value));
    if (!ok) throw invalid(`fields.${key}: must be a string, a finite number, a boolean or null`);
  }
  const now = (options.now ?? Date.now)();
  const payload: RequestStatePayload = {
    ...fields,
    v: REQUEST_STATE_VERSION,
    tenant: input.tenant,
    principal: input.principal,
    m: input.method,
    n: input.name,
    d: input.digest,
    flow: input.flow,
    jti: randomBytes(16).toString("base64url"),
    iat: now,
    exp: now + ttlSeconds * 1000,
    phase: input.phase,
  };
  const plain = Buffer.from(JSON.stringify(payload), "utf8");
  if (plain.length > MAX_REQUEST_STATE_PAYLOAD_BYTES) throw invalid(`the payload has ${plain.length} bytes, at most ${MAX_REQUEST_STATE_PAYLOAD_BYTES}`);
  const kid = keyring.activeKid;
  const key = keyring.keyFor(kid);
  if (!key) throw new ChaosError("failed_precondition", `mrtr keyring: the active kid ${kid} has no key`);
  const iv = randomBytes(IV_BYTES);
  const cipher = createCipheriv("aes-256-gcm", key, iv, { authTagLength: TAG_BYTES });
  cipher.setAAD(aadOf(kid));
  const sealed = Buffer.concat([iv, cipher.update(plain), cipher.final(), cipher.getAuthTag()]);
  return { state: `${REQUEST_STATE_PREFIX}.${kid}.${sealed.toString("base64url")}`, payload };
}

const refuse = (reason: RequestStateRefusalReason, problem: string, extra: Omit<RequestStateRefusal, "ok" | "reason" | "problem"> = {}): RequestStateRefusal => ({
  ok: false,
  reason,
  problem,
  ...extra,
});

/** The payload's core fields, checked; undefined when one is missing or of the wrong type. */
function corePayload(value: unknown): RequestStatePayload | undefined {
  if (value === null || typeof value !== "object" || Array.isArray(value)) return undefined;
  const p = value as Record<string, unknown>;
  const strings = ["tenant", "principal", "m", "n", "d", "flow", "jti", "phase"] as const;
  if (!strings.every((k) => typeof p[k] === "string")) return undefined;
  if (!Number.isSafeInteger(p.iat) || !Number.isSafeInteger(p.exp)) return undefined;
  return p as unknown as RequestStatePayload;
}

/**
 * Opens a state a client sent back and checks it against this call, every check with its own
 * reason ({@link REQUEST_STATE_REFUSAL_REASONS}): shape, kid, tag, version, tenant, principal,
 * expiry, method, then name and digest when the expectation names them. Never throws for what
 * the client sent: an attacker-controlled value is an answer, not an exception.
 */
export function openRequestState(keyring: MrtrKeyring, state: unknown, expect: OpenExpectation, options: { now?: () => number } = {}): OpenResult {
  if (typeof state !== "string") return refuse("malformed", "requestState is not a string");
  if (state.length > MAX_REQUEST_STATE_CHARS) return refuse("malformed", `requestState is longer than ${MAX_REQUEST_STATE_CHARS} characters`);
  const parts = state.split(".");
  if (parts.length !== 3 || parts[0] !== REQUEST_STATE_PREFIX) return refuse("malformed", `requestState is not ${REQUEST_STATE_PREFIX}.<kid>.<sealed>`);
  const [, kid, body] = parts as [string, string, string];
  if (!MRTR_KID_RE.test(kid)) return refuse("malformed", "requestState names no valid kid");
  if (!B64URL_RE.test(body)) return refuse("malformed", "requestState's sealed part is not base64url", { kid });
  const bytes = Buffer.from(body, "base64url");
  // One encoding per byte string: a changed character always changes the bytes, or is refused here.
  if (bytes.toString("base64url") !== body) return refuse("malformed", "requestState's sealed part is not canonical base64url", { kid });
  if (bytes.length < IV_BYTES + TAG_BYTES + 1) return refuse("malformed", "requestState is too short to be sealed", { kid });
  const key = keyring.keyFor(kid);
  if (!key) return refuse("unknown_kid", `requestState was sealed with kid ${kid}, which this keyring does not hold`, { kid });

  let plain: Buffer;
  try {
    const decipher = createDecipheriv("aes-256-gcm", key, bytes.subarray(0, IV_BYTES), { authTagLength: TAG_BYTES });
    decipher.setAAD(aadOf(kid));
    decipher.setAuthTag(bytes.subarray(bytes.length - TAG_BYTES));
    plain = Buffer.concat([decipher.update(bytes.subarray(IV_BYTES, bytes.length - TAG_BYTES)), decipher.final()]);
  } catch {
    return refuse("tag", "requestState does not verify (changed, truncated, or sealed with another key)", { kid });
  }
  let value: unknown;
  try {
    value = JSON.parse(plain.toString("utf8"));
  } catch {
    return refuse("malformed", "requestState's payload is not JSON", { kid });
  }
  if (value !== null && typeof value === "object" && (value as { v?: unknown }).v !== REQUEST_STATE_VERSION) {
    return refuse("version", `requestState has payload version ${JSON.stringify((value as { v?: unknown }).v)}, this edge reads ${REQUEST_STATE_VERSION}`, { kid });
  }
  const payload = corePayload(value);
  if (!payload) return refuse("malformed", "requestState's payload lacks its fields", { kid });
  if (payload.tenant !== expect.tenant) return refuse("tenant", "requestState belongs to another tenant", { kid });
  if (payload.principal !== expect.principal) return refuse("principal", "requestState belongs to another principal", { kid });
  const handles = { kid, jti: payload.jti, flow: payload.flow, name: payload.n };
  const now = (options.now ?? Date.now)();
  if (payload.exp <= now) return refuse("expired", `requestState expired ${new Date(payload.exp).toISOString()}`, handles);
  if (payload.m !== expect.method) return refuse("method", `requestState was sealed for ${payload.m}, not ${expect.method}`, handles);
  const target = checkRequestStateTarget(payload, expect);
  if (!target.ok) return { ...target, ...handles };
  return { ok: true, kid, payload };
}

/**
 * The binding to the call that only the handler can check (the SDK's verify hook has no params):
 * `n` equals this call's tool/prompt/URI and `d` the digest of its arguments. Each is checked
 * only when `call` names it.
 */
export function checkRequestStateTarget(
  payload: RequestStatePayload,
  call: { readonly name?: string; readonly digest?: string },
): { readonly ok: true } | RequestStateRefusal {
  if (call.name !== undefined && payload.n !== call.name) return refuse("name", "requestState belongs to another tool, prompt or resource");
  if (call.digest !== undefined && payload.d !== call.digest) return refuse("digest", "requestState belongs to a call with other arguments");
  return { ok: true };
}
