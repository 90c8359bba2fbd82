import { createHash } from "node:crypto";
import express, { type Request, type RequestHandler, type Response } from "express";
import type { Identity } from "../auth/identity.js";
import { registryKeyDigest } from "../sessions/session-store.js";
import { newCsrfToken, sameToken, signInTokenMatches } from "./csrf.js";
import { cookie, cookieNames, readCookie } from "./headers.js";
import type { ConsoleRouterOptions } from "./options.js";
import { signedInPage, type PageFrame } from "./pages.js";
import { field, nextPage, type ConsoleReplies, type SignedInLocals } from "./replies.js";
import {
  CONSOLE_MAX_AGE_SECONDS,
  newSessionId,
  OAUTH_SIGN_IN,
  OPERATOR_LINK,
  SIGN_IN_FAILURE_LIMIT,
  SIGN_IN_FAILURE_WINDOW_SECONDS,
  type ConsoleSession,
} from "./sessions.js";

/** The largest form body the console reads (413 above it). */
export const MAX_FORM_BYTES = 8 * 1024;

/** The session id cognition and the ledger record for this console session: never the cookie itself. */
function consoleSessionId(id: string): string {
  return `console-${createHash("sha256").update(id, "utf8").digest("hex").slice(0, 12)}`;
}

/**
 * What stands in front of the console's routes: a form post's checks, the signed-in session
 * whose credential still holds, the session's CSRF token; and sessions started and ended.
 */
export interface SessionGate {
  /** Origin, type, size, then the url-encoded body. */
  readonly formPost: RequestHandler[];
  /** A live session whose credential still holds; its {@link SignedInLocals} on `res.locals`. */
  readonly signedIn: RequestHandler;
  /** The session's token in the form. */
  readonly csrfChecked: RequestHandler;
  /**
   * Signs `session` in: the session cookie set, the pre-session one cleared, on to the list (or
   * `next`); `landing`: a page that moves on by itself, after an OAuth sign-in.
   */
  startSession(req: Request, res: Response, session: Omit<ConsoleSession, "csrf" | "createdAt" | "lastSeenAt">, next?: string, landing?: boolean): Promise<void>;
  endSession(req: Request, res: Response, id: string): Promise<void>;
  /** A sign-in attempt from an address past its failures is refused before its credential is read. */
  tooManyFailures(req: Request, res: Response): Promise<boolean>;
  /** Whether the sign-in form's token matches its pre-session cookie. */
  signInFormValid(req: Request): boolean;
  remoteAddress(req: Request): string;
}

/** The gate of one console, as its options configure it. */
export function sessionGate(options: ConsoleRouterOptions, replies: ConsoleReplies): SessionGate {
  const { deps, sessions, keys, directory, signInLinks, oauthSignIn, signingKey } = options;
  const { place, send, refuse, showSignIn } = replies;

  /**
   * Signs `session` in: the session cookie set, the pre-session one cleared, on to the list (or
   * `next`). After an OAuth sign-in (`landing`) the answer is a page that moves on by itself
   * rather than a redirect: the callback was reached from the issuer's site, and a browser keeps
   * treating the redirects of that navigation as cross-site, so the SameSite=Strict session
   * cookie would not be sent with the next page yet; the landing page's own refresh is a
   * navigation from the console's origin, which sends it.
   */
  const startSession = async (
    req: Request,
    res: Response,
    session: Omit<ConsoleSession, "csrf" | "createdAt" | "lastSeenAt">,
    next?: string,
    landing = false,
  ) => {
    const p = place(req);
    const id = newSessionId(session.tenant);
    const stored = await sessions.create(id, { ...session, csrf: newCsrfToken() });
    const names = cookieNames(p.secure);
    const maxAge = session.expiresAt === undefined ? CONSOLE_MAX_AGE_SECONDS : Math.max(1, Math.min(CONSOLE_MAX_AGE_SECONDS, Math.ceil((session.expiresAt - Date.now()) / 1000)));
    res.append("Set-Cookie", cookie(names.session, id, { secure: p.secure, maxAgeSeconds: maxAge }));
    res.append("Set-Cookie", cookie(names.signIn, "", { secure: p.secure, maxAgeSeconds: 0 }));
    const via = session.keySha256 === OPERATOR_LINK ? "operator link" : session.keySha256 === OAUTH_SIGN_IN ? "OAuth" : "API key";
    deps.logger.info({ tenant: session.tenant, principal: session.principal, via }, "console sign-in");
    if (!landing) return res.redirect(303, `${p.base}${next ?? ""}`);
    const frameIn: PageFrame = { base: p.base, signedIn: { tenant: stored.tenant, principal: stored.principal, csrf: stored.csrf } };
    send(res, 200, signedInPage(frameIn, { href: `${p.base}${next ?? ""}`, ...(session.expiresAt !== undefined ? { until: new Date(session.expiresAt) } : {}) }));
  };

  const remoteAddress = (req: Request) => req.socket.remoteAddress ?? "unknown";

  /** A sign-in attempt from an address past its failures is refused before its credential is read. */
  const tooManyFailures = async (req: Request, res: Response): Promise<boolean> => {
    if ((await sessions.failedSignIns(remoteAddress(req))) < SIGN_IN_FAILURE_LIMIT) return false;
    res.set("Retry-After", String(SIGN_IN_FAILURE_WINDOW_SECONDS));
    refuse(
      req,
      res,
      429,
      "Too many failed sign-ins",
      `${SIGN_IN_FAILURE_LIMIT} sign-ins from this address failed within ${SIGN_IN_FAILURE_WINDOW_SECONDS / 60} minutes; try again later.`,
    );
    return true;
  };

  const signInFormValid = (req: Request) => signInTokenMatches(signingKey, readCookie(req.headers.cookie, cookieNames(place(req).secure).signIn), field(req, "csrf"));

  // The parts every POST is built from, in this order: formPost (Origin, type, size, then the
  // url-encoded body), signedIn (a live session whose credential still holds), csrfChecked (the
  // session's token in the form). The answer forms (approve / reject a step or a spend, POST on
  // the approval's own path) are routes of the same three.
  const formPost: RequestHandler[] = [
    (req, res, next) => {
      const origin = req.headers.origin;
      if (origin === undefined || !place(req).origins.includes(origin)) {
        const why = origin === undefined ? "it carries no Origin header" : `it comes from ${origin}`;
        return refuse(req, res, 403, "Refused", `This form was refused: ${why}, and a console form must be sent from the console's own page.`);
      }
      if (!req.is("application/x-www-form-urlencoded")) {
        return refuse(req, res, 415, "Refused", "This form was refused: send it as application/x-www-form-urlencoded.");
      }
      next();
    },
    express.urlencoded({ extended: false, limit: MAX_FORM_BYTES, parameterLimit: 20, type: "application/x-www-form-urlencoded" }),
  ];

  const endSession = async (req: Request, res: Response, id: string) => {
    await sessions.delete(id);
    const p = place(req);
    res.append("Set-Cookie", cookie(cookieNames(p.secure).session, "", { secure: p.secure, maxAgeSeconds: 0 }));
  };

  const signedIn: RequestHandler = async (req, res, next) => {
    const id = readCookie(req.headers.cookie, cookieNames(place(req).secure).session);
    const session = id ? await sessions.get(id) : undefined;
    if (!id || !session) {
      if (req.method === "GET") {
        // Back to this page once signed in, when it is an approval's (the link an answer gave).
        const next = nextPage(req.path);
        return res.redirect(303, `${place(req).base}/sign-in${next ? `?next=${encodeURIComponent(next)}` : ""}`);
      }
      return refuse(req, res, 403, "Not signed in", "You are not signed in (or your session ended): sign in again, then repeat what you did.");
    }
    // The credential is read again on every request: a removed key, or a key that lost the
    // approver role, ends the session now, not when the cookie expires.
    let holds: boolean;
    if (session.keySha256 === OPERATOR_LINK) {
      holds = signInLinks !== undefined && session.principal === "operator";
    } else if (session.keySha256 === OAUTH_SIGN_IN) {
      // The token is not kept, so nothing is re-read: the store ends the session at the token's
      // exp. The role held at sign-in; a server no longer configured for the issuer ends it.
      holds = oauthSignIn !== undefined;
    } else {
      let identity: Identity | undefined;
      const registryKey = registryKeyDigest(session.keySha256);
      if (registryKey !== undefined) {
        const answer = await directory?.resolveDigest(registryKey);
        identity = answer?.kind === "identity" ? answer.identity : undefined;
      } else {
        await keys?.refresh?.();
        identity = keys?.identityOfDigest(session.keySha256);
      }
      holds = identity !== undefined && identity.tenant === session.tenant && identity.principal === session.principal && (identity.roles ?? []).includes("approver");
    }
    // Whatever signed it in: a tenant the registry disabled is not served here either.
    if (holds && (await directory?.tenantRefusal(session.tenant))) holds = false;
    if (!holds) {
      await endSession(req, res, id);
      const oauthSession = session.keySha256 === OAUTH_SIGN_IN;
      deps.logger.info(
        { tenant: session.tenant, principal: session.principal },
        oauthSession ? "console session ended: this server no longer signs in through OAuth" : "console session ended: its API key was removed or lost the approver role",
      );
      return showSignIn(req, res, 401, {
        notice: oauthSession
          ? "Your session ended: this server no longer signs people in through its OAuth issuer."
          : "Your session ended: the API key you signed in with was removed, or no longer holds the approver role.",
      });
    }
    const locals: SignedInLocals = {
      consoleSession: session,
      consoleSessionId: id,
      consoleCall: { tenant: session.tenant, principal: session.principal, sessionId: consoleSessionId(id) },
    };
    Object.assign(res.locals, locals);
    next();
  };

  const csrfChecked: RequestHandler = (req, res, next) => {
    const { consoleSession } = res.locals as SignedInLocals;
    if (!sameToken(field(req, "csrf"), consoleSession.csrf)) {
      return refuse(req, res, 403, "Refused", "This form was refused: its CSRF token is missing or not this session's. Reload the page and try again.");
    }
    next();
  };
  return { formPost, signedIn, csrfChecked, startSession, endSession, tooManyFailures, signInFormValid, remoteAddress };
}
