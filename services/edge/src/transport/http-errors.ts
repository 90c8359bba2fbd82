import type { Response } from "express";
import type { Identity } from "../auth/identity.js";
import type { RequestId } from "./incoming.js";

/** What the `/mcp` middlewares leave on `res.locals` for the ones after them. */
export type McpLocals = { identity: Identity; tenantGeneration?: number; keySha256?: string; oauth?: boolean; tokenExpiresAt?: number; requestId?: RequestId; bodyHead?: () => Buffer };

/** Every error this layer writes carries the request's id once the body could be read (null before). */
export function jsonRpcError(res: Response, status: number, code: number, message: string, headers: Record<string, string> = {}) {
  const id = (res.locals as McpLocals).requestId ?? null;
  res.status(status).set(headers).json({ jsonrpc: "2.0", error: { code, message }, id });
}
