import type { RequestHandler } from "express";
import { hostHeaderValidation, localhostHostValidation } from "@modelcontextprotocol/express";
import { isLoopbackHost } from "../config.js";
import { jsonRpcError } from "./http-errors.js";

/** Loopback origins are the local user's own pages; every other browser origin must be listed. */
function isLoopbackOrigin(origin: string): boolean {
  try {
    const url = new URL(origin);
    return (url.protocol === "http:" || url.protocol === "https:") && isLoopbackHost(url.hostname);
  } catch {
    return false;
  }
}

/** The Origin check of `/mcp`: loopback origins and the listed ones pass, as does a request without one. */
export function originValidation(allowed: readonly string[]): RequestHandler {
  return (req, res, next) => {
    const origin = req.headers.origin;
    if (origin === undefined || isLoopbackOrigin(origin) || allowed.includes(origin)) return next();
    jsonRpcError(res, 403, -32000, `Forbidden: Origin ${origin} is not allowed`);
  };
}

/** The Host check of `/mcp` for a listener bound to `host`; undefined where API keys alone guard it. */
export function hostValidation(host: string, allowedHosts: readonly string[] | undefined): RequestHandler | undefined {
  if (allowedHosts && allowedHosts.length > 0) return hostHeaderValidation([...allowedHosts]);
  if (isLoopbackHost(host)) return localhostHostValidation();
  // A non-loopback bind without a Host list: bearer keys (required there) stop DNS rebinding.
  return undefined;
}
