import { Router, type ErrorRequestHandler } from "express";
import { ChaosError, type ErrorCode } from "@chaos-core/kit";
import { approvalRoutes } from "./approval-routes.js";
import { CONSOLE_CSS } from "./console-css.js";
import { setConsoleHeaders } from "./headers.js";
import type { ConsoleRouterOptions } from "./options.js";
import { consoleReplies } from "./replies.js";
import { MAX_FORM_BYTES, sessionGate } from "./session-gate.js";
import { signInRoutes } from "./sign-in-routes.js";

/** The page status of a service's refusal, by its code; anything else is 500. */
const STATUS: Partial<Record<ErrorCode, number>> = {
  invalid_argument: 400,
  unauthenticated: 401,
  permission_denied: 403,
  not_found: 404,
  failed_precondition: 409,
  conflict: 409,
  resource_exhausted: 429,
  unavailable: 503,
  deadline_exceeded: 504,
};

/**
 * The approval console (docs/approvals.md §2) as an express Router, mounted at `/approvals`
 * behind the same Host and Origin checks as `/mcp` (by `transport/http.ts` on the MCP listener,
 * by `transport/console-listener.ts` for `chaos-core stdio`). Server-rendered pages, no
 * script; every route `no-store` with a strict CSP; every POST checked for its Origin, its type
 * and size, and its CSRF token ({@link sessionGate}; the routes are {@link signInRoutes} and
 * {@link approvalRoutes}). A session is signed in by an approver's API key (never an agent's: the key must
 * hold the approver role), through the edge's OAuth issuer (a token holding the approver scope;
 * docs/auth.md, "The approval console"), or by the standalone operator's one-time link, and
 * reads only its own tenant's approvals. It lists and shows them, and answers them: `POST` on an approval's
 * own page with `decision=approve|reject` resolves a step through cognition (channel console) or
 * answers a spend through the ledger (`approved_via: "console"`), as the signed-in principal;
 * cognition and the ledger enforce the channels policy accepts, no self-approval and once-only,
 * and the page shows their refusals.
 */
export function createConsoleRouter(options: ConsoleRouterOptions): Router {
  const { deps } = options;
  const router = Router();
  const replies = consoleReplies(options);
  const { refuse } = replies;
  const gate = sessionGate(options, replies);

  router.use((_req, res, next) => {
    setConsoleHeaders(res);
    next();
  });

  router.get("/console.css", (_req, res) => {
    res.type("text/css; charset=utf-8").send(CONSOLE_CSS);
  });

  signInRoutes(router, options, replies, gate);
  approvalRoutes(router, options, replies, gate);

  router.use((req, res) => refuse(req, res, 404, "Not found", "The console has no such page."));

  const onError: ErrorRequestHandler = (err: { type?: string; status?: number }, req, res, next) => {
    if (res.headersSent) return next(err);
    if (err.type === "entity.too.large") return refuse(req, res, 413, "Refused", `This form was refused: it is larger than ${MAX_FORM_BYTES} bytes.`);
    if (typeof err.status === "number" && err.status >= 400 && err.status < 500) {
      return refuse(req, res, err.status, "Refused", "This request could not be read as a form.");
    }
    const e = ChaosError.from(err);
    const status = STATUS[e.code] ?? 500;
    if (status === 500) deps.logger.error({ err }, "console request failed");
    const message = status === 500 ? "Something went wrong on the server; the operator's log says what." : e.message;
    refuse(req, res, status, status === 404 ? "Not found" : status === 503 ? "Unavailable" : "Refused", message);
  };
  router.use(onError);
  return router;
}
