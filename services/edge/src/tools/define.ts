import type { z } from "zod";
import type { CallContext } from "@chaos-core/kit";
import type { ElicitRequestFormParams, ElicitRequestURLParams, ElicitResult, LoggingLevel, ToolAnnotations } from "@modelcontextprotocol/server";
import type { Role } from "../auth/identity.js";
import type { EdgeDeps } from "../deps.js";

/** Groups of tools that can be enabled together (DESIGN: "The MCP surface"). */
export type Toolset = "core" | "council" | "governance" | "finance-reference";

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
  /**
   * Roles of this request's verified API key (never from a header or an argument); empty over
   * stdio and unauthenticated loopback HTTP.
   */
  readonly roles: ReadonlySet<Role>;
  /**
   * The elicitation modes the client declared at initialize: `form` (a question it answers,
   * which its host can answer by itself) and `url` (MCP 2025-11-25: it asks its user to open a
   * page, whose answer comes from the page). An empty `elicitation: {}` means form, as the spec says.
   */
  elicitModes(): ElicitModes;
  /**
   * Asks the person at the client (MCP elicitation, form mode) as part of this request. The
   * answer's content is the client's: validate it before acting on it.
   */
  elicit(params: Omit<ElicitRequestFormParams, "mode">): Promise<ElicitResult>;
  /**
   * Asks the client to have its user open `url` (MCP elicitation, URL mode) as part of this
   * request, on its own stream. `accept` only means the user agreed to open it: what happens on
   * the page is never the client's answer. `timeoutMs` bounds the wait for that reply (at most,
   * and by default, the form's ten minutes).
   */
  elicitUrl(params: Omit<ElicitRequestURLParams, "mode">, timeoutMs?: number): Promise<ElicitResult>;
  /**
   * Tells the client that the out-of-band interaction of a URL elicitation finished
   * (`notifications/elicitation/complete {elicitationId}`), on this request's stream.
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

/** What {@link ToolContext.elicitModes} answers. */
export interface ElicitModes {
  readonly form: boolean;
  readonly url: boolean;
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
  readonly toolset: Toolset;
  readonly title: string;
  readonly description: string;
  readonly input: I;
  readonly output: O;
  readonly annotations: ToolHints;
  run(args: z.output<I>, ctx: ToolContext): Promise<z.input<O>>;
}

/** Keeps a definition's argument and result types checked while the list holds them erased. */
export function defineTool<I extends z.ZodObject, O extends z.ZodObject>(def: ToolDefinition<I, O>): ToolDefinition {
  return def as unknown as ToolDefinition;
}
