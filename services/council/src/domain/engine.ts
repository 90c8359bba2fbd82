import { ChaosError } from "@chaos-core/kit";
import { continueSessionWith } from "./continue-session.js";
import { createSessionWith } from "./create-session.js";
import type { VerifyMode } from "./grounding.js";
import { buildPersonaBrief, type PersonaBrief } from "./personas.js";
import { isPhase, type Phase } from "./phases.js";
import { recallSessionWith } from "./recall-session.js";
import { RULESET } from "./ruleset.js";
import { saveOutputWith } from "./save-output.js";
import { scoreSessionWith } from "./score-session.js";
import type { CouncilSession } from "./session.js";
import { verifyClaimsWith } from "./verify-claims.js";

// The API the handlers call: each operation under the current RULESET. Each operation lives in
// its own file under a given ruleset (create-session.ts, save-output.ts, recall-session.ts,
// verify-claims.ts, continue-session.ts, score-session.ts).

export { PHASES, type Phase } from "./phases.js";
export { RULESET, type Ruleset } from "./ruleset.js";
export type { PersonaBrief } from "./personas.js";
export type { AttemptEntry, CouncilSession, PhaseRecord } from "./session.js";
export { restoreSession } from "./session.js";

/** Starts a session: scores the task's complexity, picks the pipeline and briefs the first persona. */
export function createSession(input: { id: string; tenant: string; task: string; title?: string; context?: string; now: Date }): {
  session: CouncilSession;
  result: Record<string, unknown>;
} {
  return createSessionWith(input, RULESET);
}

/** Validates, scores and records one phase output; returns a new session (the input is not changed). */
export function saveOutput(session: CouncilSession, input: { phase: string; output: unknown; now: Date }): {
  session: CouncilSession;
  result: Record<string, unknown>;
} {
  return saveOutputWith(session, input, RULESET);
}

/** The session's state for the calling model: full, summary or decisions only. */
export function recallSession(session: CouncilSession, format: "full" | "summary" | "decisions"): Record<string, unknown> {
  return recallSessionWith(session, format, RULESET);
}

/** Checks claims against what the session stored. */
export function verifyClaims(
  session: CouncilSession,
  input: { claims: Array<{ text: string; source?: string }>; mode: VerifyMode },
): Record<string, unknown> {
  return verifyClaimsWith(session, input, RULESET);
}

/** Where the session stands and what the active persona must produce next. */
export function continueSession(session: CouncilSession): Record<string, unknown> {
  return continueSessionWith(session, RULESET);
}

/** The session's multi-dimensional score. */
export function scoreSession(session: CouncilSession): Record<string, unknown> {
  return scoreSessionWith(session, RULESET);
}

/** The brief of the persona that owns `phase` (standard depth). */
export function personaBrief(phase: Phase): PersonaBrief {
  if (!isPhase(phase)) throw new ChaosError("invalid_argument", `phase: must be one of decompile, design, critique, synthesis, verify`);
  return buildPersonaBrief(phase, RULESET);
}
