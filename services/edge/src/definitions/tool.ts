import type { z } from "zod";
import type { CallContext, ToolsetName } from "@chaos-core/kit";
import type { ElicitRequestFormParams, ElicitResult, LoggingLevel, ToolAnnotations } from "@modelcontextprotocol/server";
import type { Role } from "../auth/identity.js";
import type { EdgeDeps } from "../deps/edge-deps.js";

/** Groups of tools that can be enabled together (DESIGN: "The MCP surface"; kit's `TOOLSET_NAMES`). */
export type Toolset = ToolsetName;

/**
 * What a tool may use while it runs. Tools hold no session state of their own (so any replica,
 * and later the stateless protocol revision, can run them): who is calling comes in `call`.
 */
export interface ToolContext {
  /**
   * Tenant and principal from the verified credential, and the MCP session id (2025-11-25) or
   * this request's ref (2026-07-28).
   */
  readonly call: CallContext;
  /** Set on a 2026-07-28 (stateless) request only: what its own `_meta` envelope says. */
  readonly modern?: ModernRequest;
  readonly deps: EdgeDeps;
  /** Aborted when the client cancels the request. */
  readonly signal: AbortSignal;
  /**
   * Logs through the edge's logger with tenant, session and tool fields, and sends the line to
   * the client as a `notifications/message` when it is at or above the level the session set.
   */
  log(level: LoggingLevel, message: string, data?: Record<string, unknown>): Promise<void>;
  /** Sends `notifications/progress` when the client asked for progress; otherwise does nothing. */
  progress(progress: number, total?: number, message?: string): Promise<void>;
  /** Whether the client asked for progress (its request's `_meta.progressToken`). */
  readonly progressRequested?: boolean;
  /**
   * Roles of this request's verified API key (never from a header or an argument); empty over
   * stdio and unauthenticated loopback HTTP.
   */
  readonly roles: ReadonlySet<Role>;
  /**
   * What this request's client declared it can do for its user: the 2026-07-28 request's own
   * `_meta` envelope, or the 2025-11-25 session's `initialize`. `formElicitation`: a question it
   * answers (which its host can answer by itself); `urlElicitation`: it asks its user to open a
   * page, whose answer comes from the page. An empty `elicitation: {}` means form, as the spec says.
   * On 2026-07-28 both are false when this edge has no MRTR keyring (it could not seal the state).
   */
  readonly client: ClientElicitation;
  /**
   * Asks the person at the client and resolves with the answer; the answer's content is the
   * client's: validate it before acting on it. Where the answer comes from is the edge's
   * business, not the tool's: on 2025-11-25 an `elicitation/create` request on this call's own
   * stream; on 2026-07-28 the first round ends here (this throws an {@link InputRequiredSignal},
   * which the edge turns into an `input_required` result with a sealed `requestState`) and the
   * client's retry, once the edge verified, bound and consumed that state, runs the tool again
   * from the start: the same `ask` then resolves with the client's answer, only if the question
   * is exactly the one the state was sealed for (otherwise the person is asked again).
   * URL mode: `accept` only means the user agreed to open the page; what happens on the page is
   * never the client's answer.
   */
  ask(question: HumanAsk): Promise<ElicitResult>;
  /**
   * The verified, bound and already consumed state of the round that asked (2026-07-28 retries
   * only); undefined on a first round and on 2025-11-25.
   */
  readonly resumed: ResumedRound | undefined;
  /** The client's answer to `key` in this round: `missing` unless {@link resumed} is set and asked `key`. */
  answer(key: string): HumanAnswerView;
  /**
   * Tells the client that the out-of-band interaction of a URL elicitation finished
   * (`notifications/elicitation/complete {elicitationId}`), on this request's stream. Nothing
   * to send on 2026-07-28: the call's result ends the interaction.
   */
  notifyElicitationComplete(elicitationId: string): Promise<void>;
  /**
   * The approval console's URL of `path` (under `/approvals`: `/step/<approval_id>`,
   * `/spend/<request_seq>`, `""` for the list), as a person reaches it from where this call came
   * in: `${CHAOS_CORE_PUBLIC_URL}/approvals/...` when set, else the MCP request's own validated
   * origin (`http://` + Host), else (stdio) the console listener's URL. Undefined when the
   * console is off. Never carries a credential: a person signs in on the page.
   */
  consoleUrl(path: string): string | undefined;
}

/** A 2026-07-28 request as its `_meta` envelope describes it (docs/protocol.md §1, §5). */
export interface ModernRequest {
  /** Minted by the edge for this request: 128 random bits, base64url; in the signed call context. */
  readonly requestRef: string;
  readonly protocolVersion: string;
  readonly clientInfo: Record<string, unknown>;
  readonly clientCapabilities: Record<string, unknown>;
  /** `io.modelcontextprotocol/logLevel`; absent: no `notifications/message` is sent. */
  readonly logLevel?: LoggingLevel;
}

/** What {@link ToolContext.client} says the client can do for its user. */
export interface ClientElicitation {
  readonly formElicitation: boolean;
  readonly urlElicitation: boolean;
}

/**
 * One question for the person at the client ({@link ToolContext.ask}). `carry` goes into the
 * sealed state of a 2026-07-28 round (never shown, never readable by the client) and comes back
 * as {@link ResumedRound.carried} on the retry: what the round that asked made and the retry
 * needs, e.g. the approval a capability call just created.
 */
export type HumanAsk = (
  | {
      readonly mode: "form";
      /** Names the question in `inputRequests` and in the sealed state; one per tool. */
      readonly key: string;
      readonly message: string;
      readonly requestedSchema: ElicitRequestFormParams["requestedSchema"];
    }
  | {
      readonly mode: "url";
      readonly key: string;
      readonly message: string;
      readonly url: string;
      /** The 2025-11-25 correlation id (`notifications/elicitation/complete`); 2026-07-28 has none. */
      readonly elicitationId: string;
      /** Bounds the 2025-11-25 wait for the reply (at most, and by default, ten minutes). */
      readonly timeoutMs?: number;
    }
) & { readonly carry?: Readonly<Record<string, string>> };

/** A retried round's state, as the edge verified it (docs/protocol.md §7). */
export interface ResumedRound {
  /** The flow id: the request ref of the round that asked, this call's ref too. */
  readonly flow: string;
  /** The question's key (`HumanAsk.key`). */
  readonly key: string;
  /** Hex SHA-256 of the question the person was shown. */
  readonly question: string;
  /** What the asking round carried (`HumanAsk.carry`), as it sealed it. */
  readonly carried: Readonly<Record<string, string>>;
}

/** The client's answer to one question of a retried round. */
export type HumanAnswerView =
  | { readonly kind: "missing" }
  | { readonly kind: "accept" | "decline" | "cancel"; readonly content?: Record<string, unknown> };

/**
 * Thrown by {@link ToolContext.ask} on a 2026-07-28 round that has no answer yet: the edge ends the
 * call with an `input_required` result asking `question`. Tool code lets it pass (a catch-all must
 * rethrow it: {@link isInputRequired}).
 */
export class InputRequiredSignal extends Error {
  constructor(
    readonly question: HumanAsk,
    /** Hex SHA-256 of the question ({@link questionDigest}), sealed into the state. */
    readonly digest: string,
  ) {
    super(`the client's user is asked (${question.key}); the client retries the call with the answer`);
    this.name = "InputRequiredSignal";
  }
}

/** Whether `err` is the signal that ends a round to ask the client's user. */
export function isInputRequired(err: unknown): err is InputRequiredSignal {
  return err instanceof InputRequiredSignal;
}

/** The four hints every tool states; "honest" means what the tool really does. */
export type ToolHints = Required<
  Pick<ToolAnnotations, "readOnlyHint" | "destructiveHint" | "idempotentHint" | "openWorldHint">
>;

/**
 * One tool of the surface, as data. The input and output schemas are zod objects: arguments
 * are checked against `input`, unknown fields refused, in `server/tool-arguments.ts` (a failure
 * is an `invalid_argument` result naming each field), and both are published as JSON Schema. `run` returns the structured result; errors are thrown and mapped once, at
 * registration, through kit's `toMcpErrorResult`.
 */
export interface ToolDefinition<I extends z.ZodObject = z.ZodObject, O extends z.ZodObject = z.ZodObject> {
  readonly name: string;
  /** Its toolset; an upstream's tool has none (exposure decides who is offered it). */
  readonly toolset: Toolset | "upstream";
  readonly title: string;
  readonly description: string;
  readonly input: I;
  readonly output: O;
  readonly annotations: ToolHints;
  /**
   * Set on a tool of an upstream MCP server (docs/federation.md §6): listed with the upstream's
   * pinned input schema and no output schema; its arguments are checked by cognition against that
   * schema (Ajv, in the dialect it declares), not by `input`; `run` returns the upstream's result
   * (content, structured content, `isError`), sent as it is. Held to upstreams.lock, never to
   * chaoscore.lock, and offered by exposure, not by toolsets.
   */
  readonly upstream?: { readonly capability: string; readonly inputSchema: Record<string, unknown> };
  run(args: z.output<I>, ctx: ToolContext): Promise<z.input<O>>;
}

/** Keeps a definition's argument and result types checked while the list holds them erased. */
export function defineTool<I extends z.ZodObject, O extends z.ZodObject>(def: ToolDefinition<I, O>): ToolDefinition {
  return def as unknown as ToolDefinition;
}
