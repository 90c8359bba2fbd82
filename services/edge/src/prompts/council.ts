import type { GetPromptResult } from "@modelcontextprotocol/server";
import type { PersonaBrief } from "@chaos-core/proto/gen/chaoscore/council/v1/council_pb.js";
import { ChaosError } from "@chaos-core/kit";
import { COUNCIL_PHASES, sessionIdSchema } from "../tools/council-shapes.js";
import { completeSessionId } from "./session-ids.js";
import { definePrompt, type PromptContext, type PromptDefinition } from "../definitions/prompt.js";

type CouncilPhase = (typeof COUNCIL_PHASES)[number];

const bullets = (items: readonly string[]) => items.map((i) => `- ${i}`).join("\n");

/** A persona's brief as the text a model reads before it works on the phase. */
export function renderBrief(brief: PersonaBrief, session?: { id: string; task: string }): string {
  const save = session
    ? `When your output is ready, call council_save with {"sessionId": "${session.id}", "phase": "${brief.phase}", "output": {…}}.`
    : `When your output is ready, call council_save with the session's id, "phase": "${brief.phase}" and your output.`;
  return [
    `# Council phase "${brief.phase}": you are the ${brief.name}`,
    ...(session ? ["", `Session ${session.id}. Task:`, "", session.task] : []),
    "",
    "## Identity",
    brief.identity,
    "",
    "## Your authority",
    bullets(brief.authority),
    "",
    "## Not your authority (output here is flagged and penalised)",
    bullets(brief.notAuthority),
    "",
    "## Instructions",
    brief.instructions,
    "",
    "## Handoff",
    brief.handoff,
    "",
    save,
  ].join("\n");
}

/** What the brief of a complete session says instead: nothing is left to save. */
export function completeText(sessionId: string): string {
  return (
    `Council session ${sessionId} has completed every phase; nothing is left to save. ` +
    "Call council_score for its assessment or council_recall for its decisions."
  );
}

function message(title: string, text: string): GetPromptResult {
  return { description: title, messages: [{ role: "user", content: { type: "text", text } }] };
}

async function briefOf(ctx: PromptContext, req: { phase?: string; sessionId?: string }) {
  const res = await ctx.deps.council.getBrief(
    { phase: req.phase ?? "", sessionId: req.sessionId ?? "" },
    { ctx: ctx.call, signal: ctx.signal },
  );
  if (!res.brief) throw new ChaosError("internal", "council answered without a brief");
  return { brief: res.brief, task: res.task, complete: res.sessionComplete };
}

function phasePrompt(phase: CouncilPhase): PromptDefinition {
  return definePrompt({
    name: `council_brief_${phase}`,
    title: `Council: the ${phase} persona's brief`,
    description:
      `The brief of the persona that owns the council's ${phase} phase: identity, authority, what is not its ` +
      "authority, the handoff it owes the next persona and the phase's instructions.",
    async get(_args, ctx) {
      const { brief } = await briefOf(ctx, { phase });
      return message(`${brief.name} (${phase})`, renderBrief(brief));
    },
  });
}

/** `council_phase_brief`: the brief of a session's active phase, with its task. */
const activeBriefPrompt = definePrompt({
  name: "council_phase_brief",
  title: "Council: brief for a session's active phase",
  description:
    "The brief of the persona whose phase is active in a council session, with the session's task: what to " +
    "produce next and what is outside that persona's authority.",
  args: { sessionId: sessionIdSchema },
  complete: { sessionId: completeSessionId },
  async get(args, ctx) {
    const { brief, task, complete } = await briefOf(ctx, { sessionId: args.sessionId });
    if (complete) return message("Council session complete", completeText(args.sessionId));
    return message(`${brief.name} (${brief.phase})`, renderBrief(brief, { id: args.sessionId, task }));
  },
});

/** The council's prompts: one per persona, and the active phase's brief of a session. */
export const COUNCIL_PROMPTS: readonly PromptDefinition[] = [...COUNCIL_PHASES.map(phasePrompt), activeBriefPrompt];
