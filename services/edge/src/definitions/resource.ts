import type { CacheHint } from "@modelcontextprotocol/server";
import type { CallContext } from "@chaos-core/kit";
import type { EdgeDeps } from "../deps/edge-deps.js";

/** What a resource may use while it is read, listed or completed; like a tool, it holds no session state. */
export interface ResourceContext {
  /** Tenant and principal from the verified credential, and the MCP session id. */
  readonly call: CallContext;
  readonly deps: EdgeDeps;
  /** Aborted when the client cancels the request (never, for a completion: the SDK passes no signal). */
  readonly signal: AbortSignal;
}

/** Every resource of the surface is one JSON document. */
export const RESOURCE_MIME_TYPE = "application/json";

/**
 * A resource at a fixed URI. `read` returns the document, or `undefined` when the caller's tenant
 * has none (the read is then "resource not found", `-32602` with `data.uri`).
 */
export interface StaticResourceDefinition {
  readonly kind: "static";
  readonly name: string;
  readonly uri: string;
  readonly title: string;
  readonly description: string;
  /** For the 2026-07-28 path (`cacheHint` on the registration; 2025-11-25 results do not carry it). */
  readonly cacheHint: CacheHint;
  read(ctx: ResourceContext): Promise<unknown>;
}

/** One resource a template's `list` offers in `resources/list`. */
export interface ListedResource {
  readonly uri: string;
  readonly name: string;
  readonly title?: string;
  readonly description?: string;
}

/**
 * A family of resources behind an RFC 6570 template (one `{variable}` per path segment). `read`
 * gets the variables; `undefined` (or a `not_found` / `invalid_argument` from a service) is
 * "resource not found". `list` adds resources to `resources/list`; `complete` completes a variable.
 */
export interface TemplateResourceDefinition {
  readonly kind: "template";
  readonly name: string;
  readonly uriTemplate: string;
  readonly title: string;
  readonly description: string;
  readonly cacheHint: CacheHint;
  read(variables: Readonly<Record<string, string>>, ctx: ResourceContext): Promise<unknown>;
  list?(ctx: ResourceContext): Promise<ListedResource[]>;
  readonly complete?: Readonly<Record<string, (value: string, ctx: ResourceContext) => Promise<string[]>>>;
}

export type ResourceDefinition = StaticResourceDefinition | TemplateResourceDefinition;
