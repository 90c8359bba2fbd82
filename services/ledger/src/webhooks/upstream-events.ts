import type { LedgerEntry } from "../log/entry.js";

/**
 * The ledger events about upstreams that notify (docs/federation.md §4): the operator's (in tenant
 * `default`'s ledger) and a tenant's own registry upstreams (in that tenant's; §12). The event's
 * `tenant` is the ledger's the entry is in.
 */
export const UPSTREAM_EVENT_TYPES = ["upstream.drift", "upstream.approved", "upstream.pinned"] as const;

/**
 * `quarantined`, `served` (a COSMETIC change) and `released`: what a serving process saw of a
 * tool against its pin (`upstream.drift`); `approved` and `pinned`: an operator re-pinned tools
 * (`upstream.approved`, `upstream.pinned`; a tenant's upstream is only ever approved).
 */
export type UpstreamDriftState = "quarantined" | "served" | "released" | "approved" | "pinned";

/** One tool an operator's pin changed: its new contract digest, none when it was unpinned. */
export interface UpstreamPinnedTool {
  readonly tool: string;
  readonly change: "added" | "changed" | "removed";
  readonly digest?: string;
}

/**
 * What an `upstream.drift` event says. Names, a verdict, sections and digests only: never an
 * upstream's declaration (headers, environment, command), so no secret a reference resolves to
 * can reach a receiver. Fields the entry does not record are absent.
 */
export interface UpstreamDriftEventData {
  readonly tenant: string;
  readonly ledger_seq: number;
  readonly upstream: string;
  readonly state: UpstreamDriftState;
  /** The tool (drift; an approval of one tool). */
  readonly tool?: string;
  /** `re-pinned`, `reverted` or `unpinned` (released). */
  readonly reason?: string;
  /** COSMETIC, SAFE, RISKY or BREAKING: against the pin (drift), or of the pin's change (approved, pinned). */
  readonly verdict?: string;
  /** The contract sections that changed (`surface`, `behavior`, `entry`). */
  readonly sections?: readonly string[];
  readonly pinned_digest?: string;
  readonly live_digest?: string;
  /** Approved, pinned: each tool whose pin changed. */
  readonly tools?: readonly UpstreamPinnedTool[];
  /** Approved, pinned: who ran the command (the operator's OS user), as the entry records it. */
  readonly by?: string;
  /** Approved: recorded as an overlay in the tenant registry, the lock being read-only (docs/federation.md §4). */
  readonly overlay?: true;
}

/** A webhook body about an upstream (Standard Webhooks' `type`, `timestamp`, `data`). */
export interface UpstreamDriftWebhookEvent {
  readonly type: "upstream.drift";
  readonly timestamp: string;
  readonly data: UpstreamDriftEventData;
}

const STATES: readonly string[] = ["quarantined", "served", "released"];
const VERDICTS: readonly string[] = ["COSMETIC", "SAFE", "RISKY", "BREAKING"];
const REASONS: readonly string[] = ["re-pinned", "reverted", "unpinned"];
const CHANGES: readonly string[] = ["added", "changed", "removed"];
const DIGEST_RE = /^sha256:[0-9a-f]{64}$/;
/** The most tools one event lists; an entry may record more (`chaos-core upstreams lock` of a large server). */
const MAX_TOOLS = 100;

/** A recorded string of a sane size, else nothing. */
function text(v: unknown, max = 128): string | undefined {
  return typeof v === "string" && v.length > 0 && v.length <= max ? v : undefined;
}

function oneOf(v: unknown, allowed: readonly string[]): string | undefined {
  return typeof v === "string" && allowed.includes(v) ? v : undefined;
}

function digest(v: unknown): string | undefined {
  return typeof v === "string" && DIGEST_RE.test(v) ? v : undefined;
}

function sections(v: unknown): string[] | undefined {
  if (!Array.isArray(v) || v.length > 8) return undefined;
  const out = v.map((s) => text(s, 32));
  return out.every((s): s is string => s !== undefined) ? out : undefined;
}

function pinnedTools(v: unknown): UpstreamPinnedTool[] | undefined {
  if (!Array.isArray(v)) return undefined;
  const out: UpstreamPinnedTool[] = [];
  for (const t of v.slice(0, MAX_TOOLS)) {
    const r = t as Record<string, unknown> | null;
    const tool = text(r?.tool);
    const change = oneOf(r?.change, CHANGES) as UpstreamPinnedTool["change"] | undefined;
    if (!tool || !change) continue;
    const d = digest(r?.digest);
    out.push({ tool, change, ...(d ? { digest: d } : {}) });
  }
  return out;
}

/** Only the fields that are set. */
function defined(data: Record<string, unknown>): UpstreamDriftEventData {
  return Object.fromEntries(Object.entries(data).filter(([, v]) => v !== undefined)) as unknown as UpstreamDriftEventData;
}

/** Whether a ledger event is about an upstream and notifies. */
export function notifiesUpstream(event: Record<string, unknown>): boolean {
  return (UPSTREAM_EVENT_TYPES as readonly unknown[]).includes(event.type);
}

/**
 * The `upstream.drift` webhook event of an upstream entry, or nothing: `upstream.drift` entries
 * (a serving process's quarantine, cosmetic change or release of a tool) and the operator's
 * `upstream.approved` and `upstream.pinned`. Every field is picked by name from the entry.
 */
export function upstreamEventOf(entry: LedgerEntry): UpstreamDriftWebhookEvent | undefined {
  const ev = entry.event;
  const upstream = text(ev.upstream, 64);
  if (!upstream || !notifiesUpstream(ev)) return undefined;
  const base = { tenant: entry.tenant, ledger_seq: entry.seq, upstream };
  if (ev.type === "upstream.drift") {
    const state = oneOf(ev.state, STATES);
    const tool = text(ev.tool);
    if (!state || !tool) return undefined;
    return {
      type: "upstream.drift",
      timestamp: entry.ts,
      data: defined({
        ...base,
        state,
        tool,
        reason: oneOf(ev.reason, REASONS),
        verdict: oneOf(ev.verdict, VERDICTS),
        sections: sections(ev.sections),
        pinned_digest: digest(ev.pinned_digest),
        live_digest: digest(ev.live_digest),
      }),
    };
  }
  return {
    type: "upstream.drift",
    timestamp: entry.ts,
    data: defined({
      ...base,
      state: ev.type === "upstream.approved" ? "approved" : "pinned",
      tool: text(ev.tool),
      verdict: oneOf(ev.verdict, VERDICTS),
      tools: pinnedTools(ev.tools),
      by: text(ev.by),
      overlay: ev.type === "upstream.approved" && ev.overlay === true ? true : undefined,
    }),
  };
}
