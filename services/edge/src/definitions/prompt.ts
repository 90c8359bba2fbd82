import type { z } from "zod";
import type { CallContext } from "@chaos-core/kit";
import type { GetPromptResult } from "@modelcontextprotocol/server";
import type { EdgeDeps } from "../deps/edge-deps.js";

/** What a prompt may use while it is rendered; like a tool, it holds no session state. */
export interface PromptContext {
  /** Tenant and principal from the verified credential, and the MCP session id. */
  readonly call: CallContext;
  readonly deps: EdgeDeps;
  /** Aborted when the client cancels the request. */
  readonly signal: AbortSignal;
}

/** MCP prompt arguments are strings; each one is a zod string schema (optional or not). */
export type PromptArgs = Record<string, z.ZodString | z.ZodOptional<z.ZodString>>;

/**
 * One prompt of the surface, as data. The SDK validates arguments against `args` (a failure is
 * a JSON-RPC invalid-params error naming the argument) and lists them for clients. Errors
 * thrown by `get` are mapped once, at registration.
 */
export interface PromptDefinition<A extends PromptArgs = PromptArgs> {
  readonly name: string;
  readonly title: string;
  readonly description: string;
  readonly args?: A;
  /** Completions of arguments (`completion/complete` with a `ref/prompt`), as the caller's tenant. */
  readonly complete?: { readonly [K in keyof A]?: (value: string, ctx: PromptContext) => Promise<string[]> };
  get(args: { [K in keyof A]: z.output<A[K]> }, ctx: PromptContext): Promise<GetPromptResult>;
}

/** Keeps a definition's argument types checked while the list holds them erased. */
export function definePrompt<A extends PromptArgs>(def: PromptDefinition<A>): PromptDefinition {
  return def as unknown as PromptDefinition;
}
