import { randomUUID } from "node:crypto";
import type { JsonObject, MessageInitShape } from "@bufbuild/protobuf";
import { ChaosError, type ServiceImpl } from "@chaos-core/kit";
import type { CouncilService, PersonaBriefSchema } from "@chaos-core/proto/gen/chaoscore/council/v1/council_pb.js";
import {
  continueSession,
  createSession,
  personaBrief,
  PHASES,
  recallSession,
  restoreSession,
  saveOutput,
  scoreSession,
  verifyClaims,
  type CouncilSession,
  type Phase,
  type PersonaBrief,
} from "../domain/engine.js";
import { exportHeaderLine, exportSessionLine } from "../export-format.js";
import { isSessionId, isSessionIdPrefix, SESSION_LIST_MAX, type CouncilSessionStore, type SessionState } from "../session-store.js";

// Handlers map proto <-> domain, load and store sessions, and nothing else: validation,
// scoring and every message a model reads live in the domain, so the in-process and gRPC
// paths cannot drift apart.

/** Options of {@link createCouncilHandlers}. */
export interface CouncilHandlerOptions {
  /** The clock the domain stamps sessions with; tests pin it. */
  now?: () => Date;
  /** Issues session ids; a random UUID unless a test pins it. */
  newId?: () => string;
}

const RECALL_FORMATS = ["full", "summary", "decisions"] as const;
type RecallFormat = (typeof RECALL_FORMATS)[number];

/** Verify modes as callers name them: the seed's words, and "both", which this service once used for "all". */
const VERIFY_MODES = { contradiction: "contradiction", grounding: "grounding", all: "all", both: "all" } as const;

function requireSessionId(id: string): string {
  if (!isSessionId(id)) {
    throw new ChaosError("invalid_argument", "sessionId must be a session id issued by council_init (a UUID)");
  }
  return id;
}

function recallFormat(format: string): RecallFormat {
  if (format === "") return "full";
  if ((RECALL_FORMATS as readonly string[]).includes(format)) return format as RecallFormat;
  throw new ChaosError("invalid_argument", `format must be one of ${RECALL_FORMATS.join(", ")}; got ${JSON.stringify(format)}`);
}

function verifyMode(mode: string): (typeof VERIFY_MODES)[keyof typeof VERIFY_MODES] {
  if (mode === "") return "all";
  if (Object.hasOwn(VERIFY_MODES, mode)) return VERIFY_MODES[mode as keyof typeof VERIFY_MODES];
  throw new ChaosError("invalid_argument", `mode must be one of contradiction, grounding, all; got ${JSON.stringify(mode)}`);
}

function phaseOf(name: string): Phase {
  if ((PHASES as readonly string[]).includes(name)) return name as Phase;
  throw new ChaosError("invalid_argument", `phase must be one of ${PHASES.join(", ")}; got ${JSON.stringify(name)}`);
}

/**
 * A domain result as the JSON object a `google.protobuf.Struct` field holds. The round trip
 * through JSON text drops `undefined` members (which a Struct cannot encode) the way a JSON
 * reply would, and gives the in-process path a copy the caller cannot share with the domain.
 */
function toStruct(result: Record<string, unknown>): JsonObject {
  return JSON.parse(JSON.stringify(result)) as JsonObject;
}

/** A domain session as the store keeps it. */
function asState(session: CouncilSession): SessionState {
  return session as unknown as SessionState;
}

/** The member at `path` of a result, if any. */
function pick(obj: unknown, path: readonly string[]): unknown {
  let at: unknown = obj;
  for (const key of path) {
    if (at === null || typeof at !== "object") return undefined;
    at = (at as Record<string, unknown>)[key];
  }
  return at;
}
const str = (obj: unknown, ...path: string[]): string => {
  const v = pick(obj, path);
  return typeof v === "string" ? v : "";
};
const num = (obj: unknown, ...path: string[]): number => {
  const v = pick(obj, path);
  return typeof v === "number" && Number.isFinite(v) ? v : 0;
};
const bool = (obj: unknown, ...path: string[]): boolean => pick(obj, path) === true;

function isBrief(v: unknown): v is PersonaBrief {
  const b = v as Partial<PersonaBrief> | null;
  return typeof b === "object" && b !== null && typeof b.phase === "string" && typeof b.name === "string" && Array.isArray(b.authority);
}

function briefToProto(brief: PersonaBrief): MessageInitShape<typeof PersonaBriefSchema> {
  return {
    phase: brief.phase,
    name: brief.name,
    identity: brief.identity,
    authority: [...brief.authority],
    notAuthority: [...brief.notAuthority],
    handoff: brief.handoff,
    instructions: brief.instructions,
  };
}

/**
 * The gRPC surface of the council service over a {@link CouncilSessionStore}. The tenant is
 * always the verified one from the call context, never a request field; session ids are
 * issued here.
 */
export function createCouncilHandlers(
  store: CouncilSessionStore,
  options: CouncilHandlerOptions = {},
): ServiceImpl<typeof CouncilService> {
  const now = options.now ?? (() => new Date());
  const newId = options.newId ?? randomUUID;

  /** A session for the read-only calls: one plain read, which a save in flight does not block. */
  async function load(tenant: string, id: string): Promise<{ session: CouncilSession }> {
    const stored = await store.get(tenant, requireSessionId(id));
    // The same answer for a session that never existed and one of another tenant (the store's
    // modify says the same for a save).
    if (!stored) throw new ChaosError("not_found", `session ${id} was not found`);
    // The state is what this service wrote through the domain; the store keeps it verbatim.
    return { session: restoreSession(stored.state) };
  }

  return {
    async init(req, ctx) {
      const { session, result } = createSession({
        id: newId(),
        tenant: ctx.call.tenant,
        task: req.task,
        ...(req.title ? { title: req.title } : {}),
        ...(req.context ? { context: req.context } : {}),
        now: now(),
      });
      await store.create(ctx.call.tenant, session.id, asState(session));
      return {
        sessionId: session.id,
        phase: session.currentPhase ?? "",
        persona: str(result, "personas", "current", "name"),
        complexityLevel: session.complexity.level,
        pipelineDepth: session.depth,
        pipeline: [...session.pipeline],
        result: toStruct(result),
      };
    },

    async save(req, ctx) {
      // One transaction: the store locks the session's row, the domain decides on the state it
      // holds, the new state is written. A save that raced another one of the same session waits
      // for it and is then decided by the domain on the state that won (a second save of the same
      // phase is refused as locked), never as a storage conflict.
      const id = requireSessionId(req.sessionId);
      const { session, result } = await store.modify(ctx.call.tenant, id, (state) => {
        // The state is what this service wrote through the domain; the store keeps it verbatim.
        const saved = saveOutput(restoreSession(state), { phase: req.phase, output: req.output, now: now() });
        return { state: asState(saved.session), result: saved };
      });
      return {
        sessionId: session.id,
        phase: str(result, "phase"),
        score: num(result, "scoring", "finalScore"),
        verdict: str(result, "scoring", "verdict"),
        canProceed: bool(result, "canProceed"),
        nextPhase: str(result, "nextPhase"),
        sessionComplete: bool(result, "sessionComplete"),
        result: toStruct(result),
      };
    },

    async recall(req, ctx) {
      const format = recallFormat(req.format);
      const { session } = await load(ctx.call.tenant, req.sessionId);
      const result = recallSession(session, format);
      return { sessionId: session.id, status: session.status, currentPhase: session.currentPhase ?? "", result: toStruct(result) };
    },

    async verify(req, ctx) {
      const mode = verifyMode(req.mode);
      const { session } = await load(ctx.call.tenant, req.sessionId);
      const result = verifyClaims(session, {
        claims: req.claims.map((c) => ({ text: c.text, ...(c.source ? { source: c.source } : {}) })),
        mode,
      });
      return {
        sessionId: session.id,
        total: num(result, "summary", "total"),
        passed: num(result, "summary", "passed"),
        failed: num(result, "summary", "failed"),
        result: toStruct(result),
      };
    },

    async continue(req, ctx) {
      const { session } = await load(ctx.call.tenant, req.sessionId);
      const result = continueSession(session);
      return {
        sessionId: session.id,
        status: session.status,
        currentPhase: session.currentPhase ?? "",
        persona: str(result, "currentPhase", "persona"),
        result: toStruct(result),
      };
    },

    async score(req, ctx) {
      const { session } = await load(ctx.call.tenant, req.sessionId);
      const result = scoreSession(session);
      return {
        sessionId: session.id,
        score: num(result, "overall", "finalScore"),
        verdict: str(result, "overall", "verdict"),
        result: toStruct(result),
      };
    },

    async listSessions(req, ctx) {
      if (!isSessionIdPrefix(req.prefix)) {
        throw new ChaosError("invalid_argument", "prefix must be the start of a session id: lowercase hex digits and hyphens, at most 36 characters");
      }
      if (req.limit > SESSION_LIST_MAX) {
        throw new ChaosError("invalid_argument", `limit must be at most ${SESSION_LIST_MAX} (0 means ${SESSION_LIST_MAX}); got ${req.limit}`);
      }
      const listed = await store.list(ctx.call.tenant, { prefix: req.prefix, limit: req.limit === 0 ? SESSION_LIST_MAX : req.limit });
      return {
        sessions: listed.map((s) => ({ sessionId: s.id, title: s.title, phase: s.currentPhase ?? "", updatedAt: s.updatedAt.toISOString() })),
      };
    },

    async getBrief(req, ctx) {
      if (req.sessionId === "") return { brief: briefToProto(personaBrief(phaseOf(req.phase))) };
      const { session } = await load(ctx.call.tenant, req.sessionId);
      // The session's own brief (its depth shapes the instructions) is the one continue gives.
      const current = pick(continueSession(session), ["personas", "current"]);
      if (session.currentPhase !== null && isBrief(current)) {
        return { brief: briefToProto(current), sessionId: session.id, task: session.task, sessionComplete: false };
      }
      const last = session.pipeline[session.pipeline.length - 1] ?? "verify";
      return { brief: briefToProto(personaBrief(last)), sessionId: session.id, task: session.task, sessionComplete: true };
    },

    async *exportData(_req, ctx) {
      const tenant = ctx.call.tenant;
      yield { line: exportHeaderLine(tenant) };
      for await (const session of store.exportSessions(tenant)) yield { line: exportSessionLine(tenant, session) };
    },

    async deleteData(_req, ctx) {
      return { sessions: BigInt(await store.deleteAll(ctx.call.tenant, { signal: ctx.signal })) };
    },

    async applyRetention(req, ctx) {
      const { deleted, cutoff } = await store.applyRetention(ctx.call.tenant, req.maxAgeSeconds, { signal: ctx.signal });
      return { deleted: BigInt(deleted), cutoff: cutoff.toISOString() };
    },
  };
}
