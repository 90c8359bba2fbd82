import { type AuthorityViolation } from "./authority.js";
import { type ComplexityAssessment } from "./complexity.js";
import { type Contradiction } from "./contradictions.js";
import { type Phase } from "./phases.js";
import { type Depth } from "./ruleset.js";
import { type PhaseScore } from "./scoring/phase-score.js";
import { type Segment, segmentsOf, taskSegments } from "./text.js";
import { type PhaseOutput, renameOldBoundaryField } from "./validation.js";

/** The latest save of one phase in the current loop. */
export interface PhaseRecord {
  phase: Phase;
  /** The loop it was saved in (0 before any loop-back). */
  loop: number;
  /** Saves of this phase in this loop, this one included. */
  attempts: number;
  output: PhaseOutput;
  score: PhaseScore;
  /** Saved with a passing score: it can no longer be changed, and the next phase is open. */
  locked: boolean;
  savedAt: string;
  contradictions: Contradiction[];
  authorityViolations: AuthorityViolation[];
}

/** One line of the save history, kept for every attempt (the records keep only the latest). */
export interface AttemptEntry {
  phase: Phase;
  loop: number;
  attempt: number;
  score: number;
  verdict: PhaseScore["verdict"];
  locked: boolean;
  contradictions: number;
  authorityViolations: number;
  savedAt: string;
}

/** The whole session state: JSON-serializable (persisted as jsonb), versioned for optimistic concurrency by the store. */
export interface CouncilSession {
  readonly id: string;
  readonly tenant: string;
  readonly task: string;
  readonly title: string;
  readonly context?: string | undefined;
  /** ISO timestamps. */
  readonly createdAt: string;
  readonly updatedAt: string;
  /** The ruleset the session was created under. */
  readonly rulesetVersion: string;
  readonly complexity: ComplexityAssessment;
  readonly depth: Depth;
  readonly pipeline: readonly Phase[];
  readonly status: "active" | "complete";
  /** approved or rejected once verify decided; in_progress before. */
  readonly outcome: "in_progress" | "approved" | "rejected";
  /** The phase to save next; null once complete. */
  readonly currentPhase: Phase | null;
  /** Loop-backs taken after a rejecting verify (full depth only). */
  readonly loops: number;
  /** The latest record of each phase in the current loop. */
  readonly phases: Readonly<Partial<Record<Phase, PhaseRecord>>>;
  /** Records a loop-back superseded, oldest first. */
  readonly archived: readonly PhaseRecord[];
  /** Every save, oldest first. */
  readonly history: readonly AttemptEntry[];
}

/** The records of the current loop in pipeline order. */
export function records(session: CouncilSession): PhaseRecord[] {
  return session.pipeline.map((p) => session.phases[p]).filter((r): r is PhaseRecord => r !== undefined);
}

/** The task's segments plus those of the given records. */
export function sessionSegments(session: CouncilSession, recs: readonly PhaseRecord[] = records(session)): Segment[] {
  return [...taskSegments(session.task, session.context), ...recs.flatMap((r) => segmentsOf(r.phase, r.output))];
}

/** The phase before `phase` in the session's pipeline, if any. */
export function previousPhase(session: CouncilSession, phase: Phase): Phase | undefined {
  const i = session.pipeline.indexOf(phase);
  return i > 0 ? session.pipeline[i - 1] : undefined;
}

/** The phase after `phase` in the session's pipeline, if any. */
export function nextPhase(session: CouncilSession, phase: Phase): Phase | undefined {
  const i = session.pipeline.indexOf(phase);
  return i >= 0 ? session.pipeline[i + 1] : undefined;
}

function restoreRecord(rec: PhaseRecord): PhaseRecord {
  const kb = rec.output.knowledgeBoundary;
  const renamed = renameOldBoundaryField(kb);
  return renamed === kb ? rec : { ...rec, output: { ...rec.output, knowledgeBoundary: renamed as PhaseOutput["knowledgeBoundary"] } };
}

/**
 * A stored session in the shape the domain reads today. Sessions saved before the knowledge
 * boundary took the seed's name hold `needsVerification` where `whatNeedsVerification` is now;
 * their records are renamed here, so a resumed session hands its open items over like a new one.
 */
export function restoreSession(state: unknown): CouncilSession {
  const session = state as CouncilSession;
  const phases = Object.fromEntries(Object.entries(session.phases).map(([p, rec]) => [p, rec && restoreRecord(rec)]));
  return { ...session, phases, archived: session.archived.map(restoreRecord) };
}
