import type { Request, Response } from "express";
import type { CallContext } from "@chaos-core/kit";
import { newCsrfToken, signInToken } from "./csrf.js";
import { cookie, cookieNames } from "./headers.js";
import type { ConsoleRouterOptions } from "./options.js";
import { messagePage, signInPage, type PageFrame, type SignInOptions } from "./pages.js";
import type { ConsoleSession } from "./sessions.js";

/** How long the sign-in form's pre-session cookie lives. */
export const SIGN_IN_COOKIE_SECONDS = 10 * 60;

/** A signed-in request's session, as the handlers after the `signedIn` middleware read it. */
export interface SignedInLocals {
  readonly consoleSession: ConsoleSession;
  /** The cookie's value (the session's id). */
  readonly consoleSessionId: string;
  /** The call context every service call of this request uses. */
  readonly consoleCall: CallContext;
}

/** How a request reached the console: which origin it is on, under which path, over https or not. */
export interface Place {
  /** The origin the browser reached the console on (where an OAuth sign-in comes back to). */
  readonly origin: string;
  /** Origins a form of this console may be posted from. */
  readonly origins: readonly string[];
  /** The console's path as the browser sees it. */
  readonly base: string;
  /** https: the cookies are `__Host-` and `Secure`. */
  readonly secure: boolean;
}

/**
 * Where sign-in may send a person on (the page a link opened before they were signed in): an
 * approval's own page, nothing else, so `next` cannot become an open redirect.
 */
const NEXT_PAGE = /^\/(step\/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|spend\/[1-9][0-9]{0,15})$/;

/** `value` when it names an approval's page ({@link NEXT_PAGE}), else undefined. */
export function nextPage(value: unknown): string | undefined {
  return typeof value === "string" && NEXT_PAGE.test(value) ? value : undefined;
}

/** One field of a parsed form, when it is one string (a repeated field is no answer). */
export function field(req: Request, name: string): string | undefined {
  const value = (req.body as Record<string, unknown> | undefined)?.[name];
  return typeof value === "string" ? value : undefined;
}

/** How a console route answers: the page it sends, a refusal, the sign-in page. */
export interface ConsoleReplies {
  /** Where the request reached the console: its origin, the console's path, https or not. */
  place(req: Request): Place;
  /** The frame every page is drawn in: the console's path, and who is signed in. */
  frame(req: Request, res: Response): PageFrame;
  send(res: Response, status: number, body: { text: string }): void;
  /** A page that says why, linking back to the approvals. */
  refuse(req: Request, res: Response, status: number, title: string, message: string): void;
  /** A sign-in that did not complete: the page links back to sign-in rather than to a list it cannot show. */
  refuseSignIn(req: Request, res: Response, status: number, title: string, message: string): void;
  /** The sign-in page, with a fresh pre-session cookie and the matching form token. */
  showSignIn(req: Request, res: Response, status: number, extra?: Pick<SignInOptions, "notice" | "error">): void;
}

/** The replies of one console, as its options configure them. */
export function consoleReplies(options: ConsoleRouterOptions): ConsoleReplies {
  const { keys, directory, signInLinks, oauthSignIn, signingKey } = options;
  const pub = options.publicUrl ? new URL(options.publicUrl) : undefined;

  const place = (req: Request): Place => {
    const host = req.headers.host ?? "";
    const viaPublic = pub !== undefined && host.toLowerCase() === pub.host.toLowerCase();
    const base = `${viaPublic ? pub.pathname.replace(/\/$/, "") : ""}${req.baseUrl}`;
    if (viaPublic) return { origin: pub.origin, origins: [pub.origin], base, secure: pub.protocol === "https:" };
    // Another allowed Host (loopback, an internal name); behind a proxy that rewrites Host the
    // browser's Origin is still the public one.
    return { origin: `http://${host}`, origins: [`http://${host}`, ...(pub ? [pub.origin] : [])], base, secure: false };
  };
  const frame = (req: Request, res: Response): PageFrame => {
    const locals = res.locals as Partial<SignedInLocals>;
    const s = locals.consoleSession;
    return { base: place(req).base, ...(s ? { signedIn: { tenant: s.tenant, principal: s.principal, csrf: s.csrf } } : {}) };
  };
  const send = (res: Response, status: number, body: { text: string }) => {
    res.status(status).type("text/html; charset=utf-8").send(body.text);
  };
  const refuse = (req: Request, res: Response, status: number, title: string, message: string) =>
    send(res, status, messagePage(frame(req, res), title, message, { href: place(req).base, label: "Back to the approvals" }));
  /** A sign-in that did not complete: the page links back to sign-in rather than to a list it cannot show. */
  const refuseSignIn = (req: Request, res: Response, status: number, title: string, message: string) =>
    send(res, status, messagePage(frame(req, res), title, message, { href: `${place(req).base}/sign-in`, label: "Back to sign-in" }));

  /** The sign-in page, with a fresh pre-session cookie and the matching form token. */
  const showSignIn = (req: Request, res: Response, status: number, extra: Pick<SignInOptions, "notice" | "error"> = {}) => {
    const p = place(req);
    const next = nextPage(req.method === "POST" ? field(req, "next") : req.query["next"]);
    const nonce = newCsrfToken();
    res.append("Set-Cookie", cookie(cookieNames(p.secure).signIn, nonce, { secure: p.secure, maxAgeSeconds: SIGN_IN_COOKIE_SECONDS }));
    send(
      res,
      status,
      signInPage(frame(req, res), {
        csrf: signInToken(signingKey, nonce),
        apiKeys: keys !== undefined || directory !== undefined,
        operatorLinks: signInLinks !== undefined,
        ...(oauthSignIn ? { oauthIssuer: oauthSignIn.issuer } : {}),
        ...(next ? { next } : {}),
        ...extra,
      }),
    );
  };

  return { place, frame, send, refuse, refuseSignIn, showSignIn };
}
