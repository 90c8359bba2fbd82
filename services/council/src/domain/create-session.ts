import { assessComplexity } from "./complexity.js";
import { iso, requireText } from "./input-checks.js";
import { personaName } from "./personas.js";
import type { Phase } from "./phases.js";
import type { Ruleset } from "./ruleset.js";
import type { CouncilSession } from "./session.js";
import { briefFor, memorySlots, phasePlan, transparencyLog } from "./session-views.js";

/**
 * Starts a session under a given ruleset (`createSession` in engine.ts uses the current one):
 * scores the task's complexity, picks the pipeline and briefs the first persona.
 */
export function createSessionWith(
  input: { id: string; tenant: string; task: string; title?: string; context?: string; now: Date },
  r: Ruleset,
): { session: CouncilSession; result: Record<string, unknown> } {
  const id = requireText("id", input.id, r.limits.maxIdChars) as string;
  const tenant = requireText("tenant", input.tenant, r.limits.maxIdChars) as string;
  const task = requireText("task", input.task, r.limits.maxTaskChars) as string;
  const context = requireText("context", input.context, r.limits.maxContextChars, true);
  const title = requireText("title", input.title, r.limits.maxTitleChars, true) ?? defaultTitle(task);
  const at = iso(input.now);
  // The task alone decides the depth, so one task always gets one pipeline whatever context comes with it.
  const complexity = assessComplexity(task, r);
  const first = complexity.pipeline[0] as Phase;
  const session: CouncilSession = {
    id,
    tenant,
    task,
    title,
    ...(context !== undefined ? { context } : {}),
    createdAt: at,
    updatedAt: at,
    rulesetVersion: r.version,
    complexity,
    depth: complexity.depth,
    pipeline: complexity.pipeline,
    status: "active",
    outcome: "in_progress",
    currentPhase: first,
    loops: 0,
    phases: {},
    archived: [],
    history: [],
  };
  const brief = briefFor(session, first, r);
  return {
    session,
    result: {
      type: "council_init",
      sessionId: id,
      title,
      adaptation: {
        complexity: {
          raw: complexity.score,
          normalized: complexity.score,
          level: complexity.level,
          pipelineDepth: complexity.depth,
          reasons: complexity.reasons,
        },
        pipeline: complexity.pipeline.map((name, i) => ({ name, persona: personaName(name), depth: complexity.depth, order: i + 1 })),
        adaptiveReason: complexity.explanation,
        maxLoops: complexity.depth === "full" ? r.loop.maxLoops : 0,
      },
      personas: { current: brief },
      phase: first,
      phasePlan: phasePlan(session),
      instructions: brief.instructions,
      memorySlots: memorySlots(session),
      transparencyLog: transparencyLog(session),
      ruleset: { version: r.version },
    },
  };
}

function defaultTitle(task: string): string {
  const first = task.split(/(?<=[.!?])\s+/)[0] ?? task;
  return first.length <= 80 ? first : `${first.slice(0, 79)}…`;
}
