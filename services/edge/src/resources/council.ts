import { ChaosError } from "@chaos-core/kit";
import { completeText, renderBrief } from "../prompts/council.js";
import type { TemplateResourceDefinition } from "../definitions/resource.js";
import { completeSessionId } from "../prompts/session-ids.js";

/** How many sessions `resources/list` offers: the tenant's newest. */
export const LISTED_SESSIONS = 50;
/** `council://sessions/{id}`: the session, as `council_recall` (format full) returns it. */
const sessionTemplate: TemplateResourceDefinition = {
  kind: "template",
  name: "council-session",
  uriTemplate: "council://sessions/{id}",
  title: "Council session",
  description: "A council session of the tenant: its task, phases, scores and decisions (what council_recall returns, format full).",
  cacheHint: { cacheScope: "private", ttlMs: 0 },
  async read({ id = "" }, ctx) {
    const res = await ctx.deps.council.recall({ sessionId: id, format: "full" }, { ctx: ctx.call, signal: ctx.signal });
    return { ...res.result, sessionId: res.sessionId, status: res.status, activePhase: res.currentPhase || null };
  },
  async list(ctx) {
    const res = await ctx.deps.council.listSessions({ limit: LISTED_SESSIONS }, { ctx: ctx.call, signal: ctx.signal });
    return res.sessions.map((s) => ({
      uri: `council://sessions/${s.sessionId}`,
      name: s.sessionId,
      title: s.title,
      description: s.phase ? `Active phase ${s.phase}; updated ${s.updatedAt}.` : `Complete; updated ${s.updatedAt}.`,
    }));
  },
  complete: { id: completeSessionId },
};

/** `council://sessions/{id}/brief`: the brief of the session's active phase, as `council_phase_brief` renders it. */
const briefTemplate: TemplateResourceDefinition = {
  kind: "template",
  name: "council-session-brief",
  uriTemplate: "council://sessions/{id}/brief",
  title: "Council session brief",
  description:
    "The brief of the persona whose phase is active in a council session (identity, authority, instructions, handoff), " +
    "with the text council_phase_brief renders.",
  cacheHint: { cacheScope: "private", ttlMs: 0 },
  async read({ id = "" }, ctx) {
    const res = await ctx.deps.council.getBrief({ sessionId: id }, { ctx: ctx.call, signal: ctx.signal });
    const brief = res.brief;
    if (!brief) throw new ChaosError("internal", "council answered without a brief");
    return {
      sessionId: res.sessionId,
      sessionComplete: res.sessionComplete,
      phase: brief.phase,
      persona: brief.name,
      identity: brief.identity,
      authority: [...brief.authority],
      notAuthority: [...brief.notAuthority],
      handoff: brief.handoff,
      instructions: brief.instructions,
      // What the prompt renders (for a complete session, that nothing is left to save).
      text: res.sessionComplete ? completeText(res.sessionId) : renderBrief(brief, { id: res.sessionId, task: res.task }),
    };
  },
  complete: { id: completeSessionId },
};

/** The council's resource templates. */
export const COUNCIL_RESOURCE_TEMPLATES: readonly TemplateResourceDefinition[] = [sessionTemplate, briefTemplate];
