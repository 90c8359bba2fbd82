import { ChaosError, isObject } from "@chaos-core/kit";

/*
 * The step-input reference form (docs/cognition.md, "Step references"). Anywhere in a step's
 * input, the JSON object
 *
 *     {"$step": "<id of an earlier step of the same run>", "path": "<JSON Pointer, RFC 6901>"}
 *
 * stands for the value at `path` in that step's output ("" or no `path`: the whole output). The
 * executor replaces every reference with its value BEFORE the input is validated, hashed, decided
 * by policy or put before a person for approval, so whatever is checked, recorded and approved is
 * the value that really runs. An object with a `$step` key is always read as a reference: one
 * with any key besides `$step` and `path`, or a `$step` that is not an earlier executed step, fails
 * the step with `invalid_argument` naming the field.
 */

/** The key that marks a reference. */
export const STEP_REF_KEY = "$step";

/** A reference to (part of) an earlier step's output. */
export interface StepReference {
  readonly $step: string;
  readonly path?: string;
}

/** Builds a reference to `path` (a JSON Pointer, "" for the whole output) in step `stepId`'s output. */
export function stepReference(stepId: string, path = ""): StepReference {
  return path === "" ? { $step: stepId } : { $step: stepId, path };
}

/** Whether a value is marked as a reference (has a `$step` key); its shape is checked on resolution. */
export function isStepReference(value: unknown): value is StepReference {
  return isObject(value) && Object.hasOwn(value, STEP_REF_KEY);
}

/** A reference found in an input, with where it sits (path segments from the input's root). */
export interface FoundReference {
  readonly at: readonly (string | number)[];
  readonly reference: StepReference;
}

/** Every reference in `value`, depth first, in document order. */
export function findReferences(value: unknown, at: readonly (string | number)[] = []): FoundReference[] {
  if (isStepReference(value)) return [{ at, reference: value }];
  if (Array.isArray(value)) return value.flatMap((v, i) => findReferences(v, [...at, i]));
  if (isObject(value)) return Object.entries(value).flatMap(([k, v]) => findReferences(v, [...at, k]));
  return [];
}

/** `value` with every reference's `$step` mapped through `rename` (used when a planner relabels step ids). */
export function renameReferences<T>(value: T, rename: (stepId: string) => string): T {
  const walk = (v: unknown): unknown => {
    if (isStepReference(v)) return { ...v, $step: typeof v.$step === "string" ? rename(v.$step) : v.$step };
    if (Array.isArray(v)) return v.map(walk);
    if (isObject(v)) return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, walk(x)]));
    return v;
  };
  return walk(value) as T;
}

function fieldName(at: readonly (string | number)[]): string {
  return ["input", ...at.map(String)].join(".");
}

function unescapeToken(token: string): string {
  return token.replace(/~1/g, "/").replace(/~0/g, "~");
}

/** The value at an RFC 6901 JSON Pointer, or `{found: false}` with the first segment that is missing. */
function atPointer(root: unknown, pointer: string): { found: true; value: unknown } | { found: false; missing: string } {
  if (pointer === "") return { found: true, value: root };
  let current = root;
  for (const raw of pointer.slice(1).split("/")) {
    const token = unescapeToken(raw);
    if (Array.isArray(current) && /^(0|[1-9][0-9]*)$/.test(token) && Number(token) < current.length) {
      current = current[Number(token)];
    } else if (isObject(current) && Object.hasOwn(current, token)) {
      current = current[token];
    } else {
      return { found: false, missing: token };
    }
  }
  return { found: true, value: current };
}

/**
 * `input` with every reference replaced by the value it points at in `outputs` (step id → the
 * output of a step that executed earlier in the same run). Throws `invalid_argument` naming the
 * field (`input.value`) for a malformed reference, one to a step that has not executed (yet), or a
 * path that is not in that output. Inputs without references come back as they are.
 */
export function resolveReferences(input: unknown, outputs: ReadonlyMap<string, unknown>): unknown {
  const walk = (v: unknown, at: readonly (string | number)[]): unknown => {
    if (isStepReference(v)) {
      const field = fieldName(at);
      const extra = Object.keys(v).filter((k) => k !== STEP_REF_KEY && k !== "path");
      if (extra.length > 0) {
        throw new ChaosError("invalid_argument", `${field}: a step reference has only "$step" and "path"; remove ${extra.map((k) => `"${k}"`).join(", ")}`);
      }
      if (typeof v.$step !== "string" || v.$step === "") {
        throw new ChaosError("invalid_argument", `${field}.$step: must be the id of an earlier step`);
      }
      const path = v.path ?? "";
      if (typeof path !== "string" || (path !== "" && !path.startsWith("/"))) {
        throw new ChaosError("invalid_argument", `${field}.path: must be a JSON Pointer such as "/items/0/value" ("" for the whole output)`);
      }
      if (!outputs.has(v.$step)) {
        throw new ChaosError("invalid_argument", `${field}: refers to step "${v.$step}", which has not executed earlier in this run`);
      }
      const found = atPointer(outputs.get(v.$step), path);
      if (!found.found) {
        throw new ChaosError("invalid_argument", `${field}.path: step "${v.$step}"'s output has nothing at "${path}" (no "${found.missing}")`);
      }
      return found.value;
    }
    if (Array.isArray(v)) return v.map((x, i) => walk(x, [...at, i]));
    if (isObject(v)) return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, walk(x, [...at, k])]));
    return v;
  };
  return findReferences(input).length === 0 ? input : walk(input, []);
}
