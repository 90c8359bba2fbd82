import { isDeepStrictEqual } from "node:util";
import { CONTRACT_KINDS, type ContractKind, type ContractSet, type Gates } from "./contract.js";
import { children, COSMETIC_KEYWORDS, isSchema, LIMIT_KEYWORDS, TYPE_KEYWORDS, valueKeywords, type JsonSchema } from "./json-schema.js";
import { INFLATION_RISK_ORDER, type InflationRisk } from "./token-economics.js";

/** How a reviewer must treat a change, gravest first (docs/contracts.md §4). */
export type Verdict = "BREAKING" | "RISKY" | "SAFE" | "COSMETIC";

export const VERDICT_ORDER: readonly Verdict[] = ["COSMETIC", "SAFE", "RISKY", "BREAKING"];

/** The graver of two verdicts. */
export function graver(a: Verdict, b: Verdict): Verdict {
  return VERDICT_ORDER.indexOf(a) >= VERDICT_ORDER.indexOf(b) ? a : b;
}

/** One change of one entry, at one place: several findings at one place take the graver verdict. */
export interface ContractChange {
  readonly kind: ContractKind;
  readonly name: string;
  /** The section (`surface`, `behavior`, …), or `entry` for an entry added or removed. */
  readonly section: string;
  /** Where in the section: a field, or a JSON Pointer into a schema. */
  readonly path: string;
  readonly verdict: Verdict;
  readonly reasons: readonly string[];
}

export interface ContractDiff {
  readonly changes: readonly ContractChange[];
  /** The gravest verdict of all changes, or `NONE` when nothing changed. */
  readonly verdict: Verdict | "NONE";
}

interface Finding {
  readonly section: string;
  readonly path: string;
  readonly verdict: Verdict;
  readonly reason: string;
}

type Emit = (f: Finding) => void;

const get = (o: unknown, k: string): unknown => (o !== null && typeof o === "object" ? (o as Record<string, unknown>)[k] : undefined);

function setOf(v: unknown): Set<string> {
  return new Set(Array.isArray(v) ? v.filter((x): x is string => typeof x === "string") : []);
}

/**
 * The findings between two JSON Schemas. For an input schema each change is judged by what it
 * does to a client's existing calls; for an output schema any change that is not cosmetic is
 * BREAKING (a client parses what it got before).
 */
function diffSchema(a: JsonSchema, b: JsonSchema, at: string, mode: "input" | "output", section: string, emit: Emit): void {
  const out = (verdict: Verdict, reason: string, path = at || "/") =>
    emit({ section, path, verdict: mode === "output" && verdict !== "COSMETIC" ? "BREAKING" : verdict, reason: mode === "output" && verdict !== "COSMETIC" ? `output schema changed: ${reason}` : reason });
  for (const k of new Set([...valueKeywords(a), ...valueKeywords(b)])) {
    const x = a[k];
    const y = b[k];
    if (isDeepStrictEqual(x, y)) continue;
    if (COSMETIC_KEYWORDS.has(k)) out("COSMETIC", `${k} changed`);
    else if (TYPE_KEYWORDS.has(k)) out("BREAKING", `${k} changed from ${JSON.stringify(x)} to ${JSON.stringify(y)}`);
    else if (LIMIT_KEYWORDS.has(k)) {
      if (x === undefined) out("SAFE", `limit ${k} ${JSON.stringify(y)} added`);
      else if (y === undefined) out("RISKY", `limit ${k} removed`);
      else out("RISKY", `limit ${k} changed from ${JSON.stringify(x)} to ${JSON.stringify(y)}`);
    } else out("RISKY", `${k} changed`);
  }
  const ap = [a.additionalProperties, b.additionalProperties];
  if (!isDeepStrictEqual(ap[0], ap[1]) && !(isSchema(ap[0]) && isSchema(ap[1]))) {
    // Unknown fields refused where they were accepted breaks a call that sent one.
    out(ap[1] === false ? "BREAKING" : "RISKY", `additionalProperties changed from ${JSON.stringify(ap[0])} to ${JSON.stringify(ap[1])}`);
  }
  const reqA = setOf(a.required);
  const reqB = setOf(b.required);
  const propsA = isSchema(a.properties) ? a.properties : {};
  const propsB = isSchema(b.properties) ? b.properties : {};
  for (const p of new Set([...Object.keys(propsA), ...Object.keys(propsB)])) {
    const path = `${at}/properties/${p.replace(/~/g, "~0").replace(/\//g, "~1")}`;
    const inA = Object.hasOwn(propsA, p);
    const inB = Object.hasOwn(propsB, p);
    if (inA && !inB) out("BREAKING", `field ${p} removed`, path);
    else if (!inA && inB) out(reqB.has(p) ? "BREAKING" : "SAFE", reqB.has(p) ? `new required field ${p}` : `optional field ${p} added`, path);
    else {
      if (reqA.has(p) && !reqB.has(p)) out("SAFE", `required field ${p} made optional`, path);
      if (!reqA.has(p) && reqB.has(p)) out("BREAKING", `field ${p} became required`, path);
    }
  }
  const childA = new Map(children(a, at));
  const childB = new Map(children(b, at));
  for (const pointer of new Set([...childA.keys(), ...childB.keys()])) {
    const x = childA.get(pointer);
    const y = childB.get(pointer);
    if (x && y) diffSchema(x, y, pointer, mode, section, emit);
    // A property added or removed is judged above; any other sub-schema appearing or going changes the type.
    else if (!/\/properties\/[^/]*$/.test(pointer)) out("BREAKING", `${x ? "sub-schema removed" : "sub-schema added"}`, pointer);
  }
}

function flag(section: string, field: string, a: unknown, b: unknown, verdict: Verdict, emit: Emit): void {
  if (a !== b) emit({ section, path: field, verdict, reason: `${field} flipped from ${String(a)} to ${String(b)}` });
}

function diffGates(a: Gates, b: Gates, emit: Emit): void {
  for (const g of ["executor", "approvalPath"] as const) {
    if (a[g] && !b[g]) emit({ section: "behavior", path: `gates.${g}`, verdict: "BREAKING", reason: `gate ${g} removed` });
    if (!a[g] && b[g]) emit({ section: "behavior", path: `gates.${g}`, verdict: "RISKY", reason: `gate ${g} added` });
  }
  const before = new Set(a.capabilities);
  const after = new Set(b.capabilities);
  const gone = [...before].filter((c) => !after.has(c));
  const added = [...after].filter((c) => !before.has(c));
  if (gone.length > 0 && added.length > 0) {
    emit({ section: "behavior", path: "gates.capabilities", verdict: "RISKY", reason: `capability gate changed from ${gone.join(", ")} to ${added.join(", ")}` });
  } else if (gone.length > 0) {
    emit({ section: "behavior", path: "gates.capabilities", verdict: "BREAKING", reason: `capability gate ${gone.join(", ")} removed` });
  } else if (added.length > 0) {
    emit({ section: "behavior", path: "gates.capabilities", verdict: "RISKY", reason: `capability gate ${added.join(", ")} added` });
  }
}

const ENTITLEMENT_FLAGS = ["filesystem", "filesystemWrite", "network", "subprocess", "crypto", "codeEvaluation"] as const;

function diffEntitlements(a: unknown, b: unknown, emit: Emit): void {
  for (const f of ENTITLEMENT_FLAGS) {
    const x = get(a, f) === true;
    const y = get(b, f) === true;
    if (!x && y) emit({ section: "entitlements", path: f, verdict: "BREAKING", reason: `entitlement ${f} gained` });
    if (x && !y) emit({ section: "entitlements", path: f, verdict: "SAFE", reason: `entitlement ${f} lost` });
  }
  for (const list of ["services", "serviceMethods", "evasion"] as const) {
    const x = setOf(get(a, list));
    const y = setOf(get(b, list));
    const gained = [...y].filter((s) => !x.has(s));
    const lost = [...x].filter((s) => !y.has(s));
    if (gained.length > 0) emit({ section: "entitlements", path: list, verdict: "BREAKING", reason: `${list} gained: ${gained.join(", ")}` });
    if (lost.length > 0) emit({ section: "entitlements", path: list, verdict: "SAFE", reason: `${list} lost: ${lost.join(", ")}` });
  }
  if (!isDeepStrictEqual(get(a, "evidence"), get(b, "evidence"))) {
    emit({ section: "entitlements", path: "evidence", verdict: "COSMETIC", reason: "evidence changed (the same entitlements found elsewhere)" });
  }
}

function diffTokenEconomics(a: unknown, b: unknown, emit: Emit): void {
  const ra = INFLATION_RISK_ORDER.indexOf(get(a, "inflationRisk") as InflationRisk);
  const rb = INFLATION_RISK_ORDER.indexOf(get(b, "inflationRisk") as InflationRisk);
  if (rb > ra) emit({ section: "tokenEconomics", path: "inflationRisk", verdict: "BREAKING", reason: `inflation risk raised from ${String(get(a, "inflationRisk"))} to ${String(get(b, "inflationRisk"))}` });
  if (rb < ra) emit({ section: "tokenEconomics", path: "inflationRisk", verdict: "SAFE", reason: `inflation risk reduced from ${String(get(a, "inflationRisk"))} to ${String(get(b, "inflationRisk"))}` });
  const x = setOf(get(a, "unboundedCollections"));
  const y = setOf(get(b, "unboundedCollections"));
  for (const p of y) if (!x.has(p)) emit({ section: "tokenEconomics", path: p, verdict: "RISKY", reason: `collection ${p} became unbounded` });
  for (const p of x) if (!y.has(p)) emit({ section: "tokenEconomics", path: p, verdict: "SAFE", reason: `collection ${p} got a limit` });
}

function diffText(section: string, a: unknown, b: unknown, fields: readonly string[], emit: Emit): void {
  for (const f of fields) if (get(a, f) !== get(b, f)) emit({ section, path: f, verdict: "COSMETIC", reason: `${f} changed` });
}

function diffBehavior(a: unknown, b: unknown, emit: Emit): void {
  diffSchema((get(a, "outputSchema") ?? {}) as JsonSchema, (get(b, "outputSchema") ?? {}) as JsonSchema, "", "output", "behavior", emit);
  flag("behavior", "readOnly", get(a, "readOnly"), get(b, "readOnly"), "BREAKING", emit);
  flag("behavior", "destructive", get(a, "destructive"), get(b, "destructive"), "BREAKING", emit);
  flag("behavior", "idempotent", get(a, "idempotent"), get(b, "idempotent"), "RISKY", emit);
  flag("behavior", "openWorld", get(a, "openWorld"), get(b, "openWorld"), "RISKY", emit);
  const ga = get(a, "gates") as Gates | undefined;
  const gb = get(b, "gates") as Gates | undefined;
  if (ga && gb) diffGates(ga, gb, emit);
}

function diffTool(a: unknown, b: unknown, emit: Emit): void {
  const sa = get(a, "surface");
  const sb = get(b, "surface");
  diffText("surface", sa, sb, ["title", "description"], emit);
  if (get(sa, "toolset") !== get(sb, "toolset")) emit({ section: "surface", path: "toolset", verdict: "RISKY", reason: `toolset changed from ${String(get(sa, "toolset"))} to ${String(get(sb, "toolset"))}` });
  diffSchema((get(sa, "inputSchema") ?? {}) as JsonSchema, (get(sb, "inputSchema") ?? {}) as JsonSchema, "", "input", "surface", emit);
  diffBehavior(get(a, "behavior"), get(b, "behavior"), emit);
  diffTokenEconomics(get(a, "tokenEconomics"), get(b, "tokenEconomics"), emit);
  diffEntitlements(get(a, "entitlements"), get(b, "entitlements"), emit);
}

function diffCapability(a: unknown, b: unknown, emit: Emit): void {
  const sa = get(a, "surface");
  const sb = get(b, "surface");
  diffText("surface", sa, sb, ["description"], emit);
  if (get(sa, "risk") !== get(sb, "risk")) emit({ section: "surface", path: "risk", verdict: "RISKY", reason: `risk changed from ${String(get(sa, "risk"))} to ${String(get(sb, "risk"))}` });
  flag("surface", "internal", get(sa, "internal"), get(sb, "internal"), "RISKY", emit);
  const ia = setOf(get(sa, "implies"));
  const ib = setOf(get(sb, "implies"));
  for (const c of ia) if (!ib.has(c)) emit({ section: "surface", path: "implies", verdict: "BREAKING", reason: `gate removed: no longer implies ${c}` });
  for (const c of ib) if (!ia.has(c)) emit({ section: "surface", path: "implies", verdict: "RISKY", reason: `gate changed: now implies ${c}` });
  diffSchema((get(sa, "inputSchema") ?? {}) as JsonSchema, (get(sb, "inputSchema") ?? {}) as JsonSchema, "", "input", "surface", emit);
  diffBehavior(get(a, "behavior"), get(b, "behavior"), emit);
  diffEntitlements(get(a, "entitlements"), get(b, "entitlements"), emit);
}

interface PromptArg {
  name: string;
  required: boolean;
  description: string;
}

function diffPrompt(a: unknown, b: unknown, emit: Emit): void {
  const sa = get(a, "surface");
  const sb = get(b, "surface");
  diffText("surface", sa, sb, ["title", "description"], emit);
  const args = (s: unknown) => new Map(((get(s, "arguments") ?? []) as PromptArg[]).map((x) => [x.name, x]));
  const xa = args(sa);
  const xb = args(sb);
  for (const [n, x] of xa) {
    const y = xb.get(n);
    const path = `arguments.${n}`;
    if (!y) emit({ section: "surface", path, verdict: "BREAKING", reason: `argument ${n} removed` });
    else {
      if (!x.required && y.required) emit({ section: "surface", path, verdict: "BREAKING", reason: `argument ${n} became required` });
      if (x.required && !y.required) emit({ section: "surface", path, verdict: "SAFE", reason: `required argument ${n} made optional` });
      if (x.description !== y.description) emit({ section: "surface", path, verdict: "COSMETIC", reason: `description of argument ${n} changed` });
    }
  }
  for (const [n, y] of xb) {
    if (!xa.has(n)) emit({ section: "surface", path: `arguments.${n}`, verdict: y.required ? "BREAKING" : "SAFE", reason: y.required ? `new required argument ${n}` : `optional argument ${n} added` });
  }
}

function diffResource(a: unknown, b: unknown, emit: Emit): void {
  const sa = get(a, "surface");
  const sb = get(b, "surface");
  diffText("surface", sa, sb, ["title", "description"], emit);
  for (const f of ["uri", "uriTemplate", "mimeType"]) {
    if (get(sa, f) !== get(sb, f)) emit({ section: "surface", path: f, verdict: "BREAKING", reason: `${f} changed from ${JSON.stringify(get(sa, f))} to ${JSON.stringify(get(sb, f))}` });
  }
  if (!isDeepStrictEqual(get(sa, "cacheHint"), get(sb, "cacheHint"))) emit({ section: "surface", path: "cacheHint", verdict: "RISKY", reason: "cacheHint changed" });
}

const DIFFERS: Record<ContractKind, (a: unknown, b: unknown, emit: Emit) => void> = {
  tools: diffTool,
  prompts: diffPrompt,
  resources: diffResource,
  capabilities: diffCapability,
};

/** The same contract but for its name: the sign of a rename. */
function sameButName(a: unknown, b: unknown): boolean {
  const strip = (c: unknown) => ({ ...(c as object), surface: { ...(get(c, "surface") as object), name: "" } });
  return isDeepStrictEqual(strip(a), strip(b));
}

/**
 * Classifies every difference between two contract sets by the verdict table of
 * docs/contracts.md §4. Findings at one place (a field, a schema node) are merged into one
 * change with the graver verdict; a difference no rule names is RISKY, never silent.
 */
export function diffContracts(before: ContractSet, after: ContractSet): ContractDiff {
  const changes: ContractChange[] = [];
  for (const kind of CONTRACT_KINDS) {
    const a = before[kind] as Record<string, unknown>;
    const b = after[kind] as Record<string, unknown>;
    const added = Object.keys(b).filter((n) => !Object.hasOwn(a, n));
    for (const name of Object.keys(a).filter((n) => !Object.hasOwn(b, n)).sort()) {
      const renamed = added.find((n) => sameButName(a[name], b[n]));
      changes.push({ kind, name, section: "entry", path: "", verdict: "BREAKING", reasons: [renamed ? `renamed to ${renamed}` : "removed"] });
    }
    for (const name of added.sort()) changes.push({ kind, name, section: "entry", path: "", verdict: "SAFE", reasons: ["added"] });
    for (const name of Object.keys(a).filter((n) => Object.hasOwn(b, n)).sort()) {
      if (isDeepStrictEqual(a[name], b[name])) continue;
      const merged = new Map<string, { section: string; path: string; verdict: Verdict; reasons: string[] }>();
      DIFFERS[kind](a[name], b[name], (f) => {
        const key = `${f.section}\u0000${f.path}`;
        const m = merged.get(key);
        if (m) {
          m.verdict = graver(m.verdict, f.verdict);
          m.reasons.push(f.reason);
        } else merged.set(key, { section: f.section, path: f.path, verdict: f.verdict, reasons: [f.reason] });
      });
      if (merged.size === 0) changes.push({ kind, name, section: "entry", path: "", verdict: "RISKY", reasons: ["changed in a way no rule names"] });
      for (const m of merged.values()) changes.push({ kind, name, ...m });
    }
  }
  const verdict = changes.reduce<Verdict | "NONE">((v, c) => (v === "NONE" ? c.verdict : graver(v, c.verdict)), "NONE");
  return { changes, verdict };
}

/** One line per change: `BREAKING tools/x surface /properties/y: new required field y`. */
export function formatDiff(diff: ContractDiff): string {
  return diff.changes
    .map((c) => `${c.verdict.padEnd(8)} ${c.kind}/${c.name} ${c.section}${c.path ? ` ${c.path}` : ""}: ${c.reasons.join("; ")}`)
    .join("\n");
}
