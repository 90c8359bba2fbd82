import { createHash } from "node:crypto";
import express, { Router, type ErrorRequestHandler, type Request, type RequestHandler, type Response } from "express";
import { ChaosError, ISSUED_KEY_PREFIX, type CallContext, type ErrorCode } from "@chaos-core/kit";
import { ApprovalChannel } from "@chaos-core/proto/gen/chaoscore/cognition/v1/cognition_pb.js";
import type { Entry } from "@chaos-core/proto/gen/chaoscore/ledger/v1/ledger_pb.js";
import {
  acceptedChannels,
  approvalChannelOptions,
  approveSpendCall,
  executeCall,
  type ApprovalChannelOption,
  type ApprovalSubject,
  type ChannelPlace,
} from "../approvals/channels.js";
import { decidedBy, spendRequestView, stepApprovalView } from "../approvals/view.js";
import { hashApiKey, type ApiKeyVerifier } from "../auth/api-keys.js";
import type { CredentialDirectory } from "../auth/directory.js";
import type { Identity } from "../auth/identity.js";
import { APPROVER_SCOPE } from "../auth/scopes.js";
import type { EdgeDeps } from "../deps/edge-deps.js";
import { REGISTRY_KEY_MARK, registryKeyDigest } from "../sessions/session-store.js";
import { CONSOLE_CSS } from "./console-css.js";
import { newCsrfToken, sameToken, signInToken, signInTokenMatches } from "./csrf.js";
import { cookie, cookieNames, readCookie, setConsoleHeaders } from "./headers.js";
import { spendPath, stepPath } from "../deps/console-links.js";
import { OAUTH_FLOW_SECONDS, SignInRefused, type ConsoleOAuthClient, type ConsoleOAuthSignIn } from "./oauth-sign-in.js";
import {
  answerRefusedPage,
  answerResultPage,
  approvalPage,
  linkSignInPage,
  listPage,
  messagePage,
  signedInPage,
  signInPage,
  type PageFrame,
  type SignInOptions,
} from "./pages.js";
import {
  CONSOLE_MAX_AGE_SECONDS,
  newSessionId,
  OAUTH_SIGN_IN,
  OPERATOR_LINK,
  SIGN_IN_FAILURE_LIMIT,
  SIGN_IN_FAILURE_WINDOW_SECONDS,
  type ConsoleSession,
  type ConsoleSessionStore,
} from "./sessions.js";
import type { SignInLinks } from "./sign-in-links.js";

/** The largest form body the console reads (413 above it). */
export const MAX_FORM_BYTES = 8 * 1024;
/** How long the sign-in form's pre-session cookie lives. */
const SIGN_IN_COOKIE_SECONDS = 10 * 60;
/** How many pending approvals, and spend requests, the list shows. */
const LIST_LIMIT = 100;

/** A refusal's message as the sentence a page shows: capitalised, with its full stop. */
const asSentence = (message: string) => `${message.charAt(0).toUpperCase()}${message.slice(1)}.`;

/** The refusal an agent's key gets at sign-in (docs/approvals.md §2): no agent approves its own request. */
export const NOT_AN_APPROVER = "this key does not hold the approver role: an agent's key cannot sign in here";

/** The API keys the console checks: the same verifier as `/mcp`, watched or fixed. */
export interface ConsoleKeys extends ApiKeyVerifier {
  /** Takes in an edit of the keys file before a check (a watched file). */
  refresh?(): Promise<void>;
  /** Whether the keys file on disk cannot be read (every key is refused then). */
  unreadable?(): boolean;
}

/** What the console router is built from. */
export interface ConsoleRouterOptions {
  /** The services the console reads (and answers through, with its answer forms). */
  readonly deps: Pick<EdgeDeps, "cognition" | "ledger" | "logger" | "operator">;
  readonly sessions: ConsoleSessionStore;
  /** The server's API keys file; absent when it has none. */
  readonly keys?: ConsoleKeys;
  /**
   * The tenant registry (docs/tenants.md): its keys (`cc_…`) sign in too, and a tenant it disables
   * ends its console sessions at their next request.
   */
  readonly directory?: CredentialDirectory;
  /** The standalone operator's one-time links; absent outside standalone. */
  readonly signInLinks?: SignInLinks;
  /** Sign-in through the edge's OAuth issuer ("Sign in with …"); absent when not configured. */
  readonly oauthSignIn?: ConsoleOAuthSignIn;
  /** `CHAOS_CORE_PUBLIC_URL`: requests under its host are on its origin, path prefix and scheme. */
  readonly publicUrl?: string;
  /** Signs the sign-in forms' tokens ({@link consoleSigningKey}). */
  readonly signingKey: Uint8Array;
}

/**
 * How a listener serves the console (`HttpTransportOptions.console`, `startConsoleListener`):
 * what the composer chooses; the keys and the services come from the listener itself.
 */
export interface ConsoleServeOptions {
  /** `CHAOS_CORE_PUBLIC_URL`, when set. */
  readonly publicUrl?: string;
  /** Where sessions live: Redis when the edge has it (every replica serves them), in-process by default. */
  readonly sessions?: ConsoleSessionStore;
  /** The standalone operator's one-time links (`chaos-core approvals console`). */
  readonly signInLinks?: SignInLinks;
  /** Signs the sign-in forms' tokens; random for this process by default ({@link consoleSigningKey}). */
  readonly signingKey?: Uint8Array;
  /**
   * The console's own client at the edge's OAuth issuer (`CHAOS_CORE_CONSOLE_OAUTH_CLIENT_ID` and
   * `…_CLIENT_SECRET_FILE`): people then sign in through the issuer too. Needs the listener's OAuth.
   */
  readonly oauthClient?: ConsoleOAuthClient;
}

/** A signed-in request's session, as the handlers after the `signedIn` middleware read it. */
export interface SignedInLocals {
  readonly consoleSession: ConsoleSession;
  /** The cookie's value (the session's id). */
  readonly consoleSessionId: string;
  /** The call context every service call of this request uses. */
  readonly consoleCall: CallContext;
}

/** How a request reached the console: which origin it is on, under which path, over https or not. */
interface Place {
  /** The origin the browser reached the console on (where an OAuth sign-in comes back to). */
  readonly origin: string;
  /** Origins a form of this console may be posted from. */
  readonly origins: readonly string[];
  /** The console's path as the browser sees it. */
  readonly base: string;
  /** https: the cookies are `__Host-` and `Secure`. */
  readonly secure: boolean;
}

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

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const REQUEST_SEQ = /^[1-9][0-9]{0,15}$/;

/**
 * Where sign-in may send a person on (the page a link opened before they were signed in): an
 * approval's own page, nothing else, so `next` cannot become an open redirect.
 */
const NEXT_PAGE = /^\/(step\/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|spend\/[1-9][0-9]{0,15})$/;

function nextPage(value: unknown): string | undefined {
  return typeof value === "string" && NEXT_PAGE.test(value) ? value : undefined;
}

/** One field of a parsed form, when it is one string (a repeated field is no answer). */
function field(req: Request, name: string): string | undefined {
  const value = (req.body as Record<string, unknown> | undefined)?.[name];
  return typeof value === "string" ? value : undefined;
}

/** The session id cognition and the ledger record for this console session: never the cookie itself. */
function consoleSessionId(id: string): string {
  return `console-${createHash("sha256").update(id, "utf8").digest("hex").slice(0, 12)}`;
}

/**
 * The approval console (docs/approvals.md §2) as an express Router, mounted at `/approvals`
 * behind the same Host and Origin checks as `/mcp` (by `transport/http.ts` on the MCP listener,
 * by `listener.ts` for `chaos-core stdio`). Server-rendered pages, no script; every route
 * `no-store` with a strict CSP; every POST checked for its Origin, its type and size, and its
 * CSRF token. A session is signed in by an approver's API key (never an agent's: the key must
 * hold the approver role), through the edge's OAuth issuer (a token holding the approver scope;
 * docs/auth.md, "The approval console"), or by the standalone operator's one-time link, and
 * reads only its own tenant's approvals. It lists and shows them, and answers them: `POST` on an approval's
 * own page with `decision=approve|reject` resolves a step through cognition (channel console) or
 * answers a spend through the ledger (`approved_via: "console"`), as the signed-in principal;
 * cognition and the ledger enforce the channels policy accepts, no self-approval and once-only,
 * and the page shows their refusals.
 */
export function createConsoleRouter(options: ConsoleRouterOptions): Router {
  const { deps, sessions, keys, directory, signInLinks, oauthSignIn, signingKey } = options;
  const pub = options.publicUrl ? new URL(options.publicUrl) : undefined;
  const router = Router();

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

  /** The ways to answer `subject` that exist besides this page, with their exact calls and commands. */
  const otherWays = (call: CallContext, subject: ApprovalSubject, channels: readonly string[]): ApprovalChannelOption[] => {
    const where: ChannelPlace = { tenant: call.tenant, canElicit: false, ...(deps.operator ? { operator: deps.operator } : {}) };
    return approvalChannelOptions(subject, channels, where);
  };

  /** The ledger entry at `seq`, for the result page; undefined without a ledger (or for seq 0: cognition without one). */
  const ledgerEntry = async (ctx: CallContext, seq: bigint): Promise<Entry | undefined> => {
    if (!deps.ledger || seq <= 0n) return undefined;
    const { entries } = await deps.ledger.listEntries({ afterSeq: seq - 1n, limit: 1 }, { ctx });
    return entries[0]?.seq === seq ? entries[0] : undefined;
  };

  /**
   * A refused answer: cognition's or the ledger's refusal (`permission_denied` / `failed_precondition`,
   * the message starting with its code) as a page that says what it means and who else can
   * answer; anything else goes on to the error handler.
   */
  const answerRefused = async (req: Request, res: Response, err: unknown, subject: ApprovalSubject & { kind: "step" | "spend" }): Promise<void> => {
    const e = ChaosError.from(err);
    if (e.code !== "permission_denied" && e.code !== "failed_precondition") throw e;
    const { consoleCall: ctx } = res.locals as SignedInLocals;
    const code = /^([a-z_]+): /.exec(e.message)?.[1] ?? "";
    const what = subject.kind === "step" ? "approval" : "spend request";
    // Who can still answer: read again, since the refusal may be that it was answered meanwhile.
    let channels: readonly string[] | undefined;
    let pending = false;
    try {
      if (subject.kind === "step") {
        const a = await deps.cognition.getApproval({ approvalId: subject.approvalId, channel: ApprovalChannel.CONSOLE }, { ctx });
        channels = a.channels;
        pending = a.status === "pending";
      } else {
        const r = (await deps.ledger?.getSpendRequest({ requestSeq: BigInt(subject.requestSeq) }, { ctx }))?.request;
        channels = r?.channels;
        pending = r?.state === "PENDING";
      }
    } catch {
      // Only the list of other ways is lost; the refusal itself is what the page says.
    }
    const accepted = channels ? acceptedChannels(channels) : undefined;
    const headline =
      code === "self_approval"
        ? "You asked for this; another approver must answer."
        : code === "channel_not_allowed"
          ? `Policy does not accept an answer on the console for this ${what}${accepted ? `: it accepts ${accepted.filter((c) => c !== "console").join(", ") || "no other channel"} (the ways below)` : ""}.`
          : code === "already_answered" || /already resolved|already answered/.test(e.message)
            ? `This ${what} was already answered: an answer is given once.`
            : code === "request_expired"
              ? `This ${what} expired before it was answered; the agent must ask again.`
              : `The answer was refused: nothing was ${subject.kind === "step" ? "approved or rejected" : "approved or declined"}.`;
    const path = subject.kind === "step" ? stepPath(subject.approvalId) : spendPath(subject.requestSeq);
    deps.logger.info({ tenant: ctx.tenant, principal: ctx.principal, [subject.kind === "step" ? "approvalId" : "requestSeq"]: subject.kind === "step" ? subject.approvalId : subject.requestSeq, code: code || e.code }, "console answer refused");
    send(
      res,
      e.code === "permission_denied" ? 403 : 409,
      answerRefusedPage(frame(req, res), {
        headline,
        message: e.message,
        ...(channels && pending ? { ways: otherWays(ctx, subject, channels) } : {}),
        path,
      }),
    );
  };

  /** The form's `decision`: approve → true, reject → false, anything else undefined. */
  const decisionOf = (req: Request): boolean | undefined => {
    const d = field(req, "decision");
    return d === "approve" ? true : d === "reject" ? false : undefined;
  };
  const noDecision = (req: Request, res: Response) =>
    refuse(req, res, 400, "Refused", "This form was refused: decision must be approve or reject.");

  router.use((_req, res, next) => {
    setConsoleHeaders(res);
    next();
  });

  router.get("/console.css", (_req, res) => {
    res.type("text/css; charset=utf-8").send(CONSOLE_CSS);
  });

  router.get("/sign-in", (req, res) => showSignIn(req, res, 200));

  router.post("/sign-in", ...formPost, async (req, res) => {
    if (!signInFormValid(req)) return showSignIn(req, res, 403, { error: "The sign-in form had expired or did not come from this page; sign in again." });
    if (await tooManyFailures(req, res)) return;
    if (!keys && !directory) return showSignIn(req, res, 403, { error: "This server has no API keys, so nobody signs in with one." });
    const apiKey = field(req, "api_key") ?? "";
    await keys?.refresh?.();
    let identity = apiKey ? keys?.verify(apiKey) : undefined;
    let keySha256 = hashApiKey(apiKey);
    let refused: string | undefined;
    if (!identity && directory && apiKey.startsWith(ISSUED_KEY_PREFIX)) {
      const answer = await directory.resolveKey(apiKey);
      if (answer.kind === "identity") {
        identity = answer.identity;
        keySha256 = `${REGISTRY_KEY_MARK}${keySha256}`;
      } else if (answer.kind === "refused") refused = asSentence(answer.refusal.message);
    }
    if (identity && !refused) {
      const tenantRefusal = await directory?.tenantRefusal(identity.tenant);
      if (tenantRefusal) refused = asSentence(tenantRefusal.message);
    }
    if (!identity || refused) {
      await sessions.recordFailedSignIn(remoteAddress(req));
      const error =
        refused ??
        (keys?.unreadable?.() ? "The server's API key list cannot be read; no key is accepted until an operator fixes it." : "The API key is not valid.");
      return showSignIn(req, res, 401, { error });
    }
    if (!(identity.roles ?? []).includes("approver")) {
      await sessions.recordFailedSignIn(remoteAddress(req));
      deps.logger.warn({ tenant: identity.tenant, principal: identity.principal }, "console sign-in refused: the key holds no approver role");
      return showSignIn(req, res, 403, { error: NOT_AN_APPROVER });
    }
    await startSession(req, res, { tenant: identity.tenant, principal: identity.principal, keySha256 }, nextPage(field(req, "next")));
  });

  /**
   * "Sign in with <issuer>" (docs/auth.md, "The approval console"): a plain link, not a form, for
   * two reasons. The CSP's `form-action 'self'` would stop a form whose answer redirects to the
   * issuer (browsers apply it to a form's redirects); and starting grants nothing: the callback
   * signs in only the browser that holds this flow's cookie, whose state must come back.
   * The flow cookie is the one cookie of the console that is `SameSite=Lax`: the issuer sends the
   * browser back with a top-level GET from its own site, and a Strict cookie would not come with
   * it, so no sign-in could complete. Lax is sent on exactly that (a cross-site top-level GET),
   * not on cross-site POSTs or subrequests; the cookie lives 10 minutes, is HttpOnly, sealed
   * (encrypted and authenticated with a key only the console holds) and cleared by the callback.
   */
  router.get("/sign-in/oauth", async (req, res) => {
    if (!oauthSignIn) return refuse(req, res, 404, "Not found", "This server does not sign people in through an OAuth issuer.");
    if (await tooManyFailures(req, res)) return;
    const p = place(req);
    let started;
    try {
      started = await oauthSignIn.start(`${p.origin}${p.base}/sign-in/oauth/callback`, nextPage(req.query["next"]));
    } catch (err) {
      if (!(err instanceof SignInRefused)) throw err;
      return refuseSignIn(req, res, err.status, err.title, err.message);
    }
    res.append("Set-Cookie", cookie(cookieNames(p.secure).oauth, started.flow, { secure: p.secure, maxAgeSeconds: OAUTH_FLOW_SECONDS, sameSite: "Lax" }));
    res.redirect(303, started.authorizationUrl);
  });

  /** Where the issuer sends the browser back: the code exchanged, the token verified, then a session when it may approve. */
  router.get("/sign-in/oauth/callback", async (req, res) => {
    if (!oauthSignIn) return refuse(req, res, 404, "Not found", "This server does not sign people in through an OAuth issuer.");
    const p = place(req);
    const names = cookieNames(p.secure);
    // Single use: whatever happens below, this flow is over.
    res.append("Set-Cookie", cookie(names.oauth, "", { secure: p.secure, maxAgeSeconds: 0, sameSite: "Lax" }));
    if (await tooManyFailures(req, res)) return;
    const query = req.originalUrl.indexOf("?");
    const callback = new URLSearchParams(query >= 0 ? req.originalUrl.slice(query + 1) : "");
    let done;
    try {
      done = await oauthSignIn.complete(readCookie(req.headers.cookie, names.oauth), callback);
    } catch (err) {
      if (!(err instanceof SignInRefused)) throw err;
      if (err.counted) await sessions.recordFailedSignIn(remoteAddress(req));
      return refuseSignIn(req, res, err.status, err.title, err.message);
    }
    const { tenant, principal, roles } = done.identity;
    if (!(roles ?? []).includes("approver")) {
      await sessions.recordFailedSignIn(remoteAddress(req));
      deps.logger.warn({ tenant, principal }, "console sign-in refused: the OAuth token holds no approver scope");
      return refuseSignIn(
        req,
        res,
        403,
        "This account cannot approve",
        `${oauthSignIn.issuer} signed you in as ${principal} (tenant ${tenant}), but the access token it issued does not hold the ${APPROVER_SCOPE} scope. ` +
          "An agent's token cannot approve anything, so no console session was opened. Sign in as a person who holds that scope at the authorization server.",
      );
    }
    await startSession(
      req,
      res,
      { tenant, principal, keySha256: OAUTH_SIGN_IN, ...(done.expiresAt !== undefined ? { expiresAt: done.expiresAt } : {}) },
      nextPage(done.next),
      true,
    );
  });

  const linkGone = (req: Request, res: Response) =>
    refuse(
      req,
      res,
      404,
      "Sign-in link not valid",
      "This sign-in link cannot be used: it was used already, it expired (a link lasts 120 seconds), or it was never issued. " +
        "Run chaos-core approvals console for a new one.",
    );

  router.get("/sign-in/link", (req, res) => {
    const token = typeof req.query["t"] === "string" ? req.query["t"] : "";
    const link = signInLinks?.peek(token);
    if (!link) return linkGone(req, res);
    const p = place(req);
    const nonce = newCsrfToken();
    res.append("Set-Cookie", cookie(cookieNames(p.secure).signIn, nonce, { secure: p.secure, maxAgeSeconds: SIGN_IN_COOKIE_SECONDS }));
    send(res, 200, linkSignInPage(frame(req, res), { token, csrf: signInToken(signingKey, nonce), tenant: link.tenant, expiresAt: link.expiresAt }));
  });

  router.post("/sign-in/link", ...formPost, async (req, res) => {
    if (!signInFormValid(req)) return refuse(req, res, 403, "Refused", "The sign-in form had expired or did not come from this page; open the link again.");
    if (await tooManyFailures(req, res)) return;
    const link = signInLinks?.consume(field(req, "t") ?? "");
    if (!link) {
      await sessions.recordFailedSignIn(remoteAddress(req));
      return linkGone(req, res);
    }
    await startSession(req, res, { tenant: link.tenant, principal: "operator", keySha256: OPERATOR_LINK });
  });

  router.post("/sign-out", ...formPost, signedIn, csrfChecked, async (req, res) => {
    const { consoleSessionId: id, consoleSession: s } = res.locals as SignedInLocals;
    await endSession(req, res, id);
    deps.logger.info({ tenant: s.tenant, principal: s.principal }, "console sign-out");
    res.redirect(303, `${place(req).base}/sign-in`);
  });

  router.get("/", signedIn, async (req, res) => {
    const { consoleCall: ctx } = res.locals as SignedInLocals;
    const [steps, spends] = await Promise.all([
      deps.cognition.listApprovals({ limit: LIST_LIMIT }, { ctx }),
      deps.ledger?.listSpendRequests({ limit: LIST_LIMIT }, { ctx }),
    ]);
    send(res, 200, listPage(frame(req, res), { steps: steps.approvals, ...(spends ? { spends: spends.requests } : {}) }));
  });

  router.get("/step/:approvalId", signedIn, async (req, res) => {
    const { consoleCall: ctx } = res.locals as SignedInLocals;
    const id = String(req.params["approvalId"]);
    if (!UUID.test(id)) return refuse(req, res, 404, "Not found", "There is no approval with this id (an approval id is a UUID).");
    // As a reviewer: every console session holds the approver role (or is the operator's link).
    const a = await deps.cognition.getApproval({ approvalId: id, channel: ApprovalChannel.CONSOLE }, { ctx });
    send(
      res,
      200,
      approvalPage(frame(req, res), stepApprovalView(a), {
        path: stepPath(id),
        pending: a.status === "pending",
        status: a.status,
        ...(a.resolvedBy ? { answered: { by: a.resolvedBy, ...(a.resolutionChannel ? { channel: a.resolutionChannel } : {}) } } : {}),
        channels: acceptedChannels(a.channels),
        ...(a.channelsRule ? { channelsRule: a.channelsRule } : {}),
        ways: otherWays(ctx, { kind: "step", approvalId: id }, a.channels),
        ownRequest: a.requestedBy === ctx.principal,
      }),
    );
  });

  router.post("/step/:approvalId", ...formPost, signedIn, csrfChecked, async (req, res) => {
    const { consoleCall: ctx } = res.locals as SignedInLocals;
    const id = String(req.params["approvalId"]);
    if (!UUID.test(id)) return refuse(req, res, 404, "Not found", "There is no approval with this id (an approval id is a UUID).");
    const approve = decisionOf(req);
    if (approve === undefined) return noDecision(req, res);
    let answered;
    try {
      // Cognition enforces the channels policy accepts, no self-approval and once-only; the
      // console vouches only for the approver role its session holds.
      answered = await deps.cognition.resolveApproval({ approvalId: id, approve, channel: ApprovalChannel.CONSOLE }, { ctx });
    } catch (err) {
      return answerRefused(req, res, err, { kind: "step", approvalId: id });
    }
    deps.logger.info({ tenant: ctx.tenant, principal: ctx.principal, approvalId: id, status: answered.status }, "console answered a step approval");
    const entry = await ledgerEntry(ctx, answered.ledgerSeq);
    const a = await deps.cognition.getApproval({ approvalId: id, channel: ApprovalChannel.CONSOLE }, { ctx }).catch(() => undefined);
    const requester = a ? `its requester, ${a.requestedBy},` : "its requester";
    const requesters = a ? `Its requester's (${a.requestedBy}'s)` : "Its requester's";
    send(
      res,
      200,
      answerResultPage(frame(req, res), {
        headline: `${approve ? "Approved" : "Rejected"} as ${answered.resolvedBy}`,
        lines: approve
          ? [
              `Approval ${id}${a ? ` (${a.capability})` : ""} is approved. It runs when ${requester} calls ${executeCall(id)}, once: ` +
                "a second call is refused, and it runs only if policy still allows it then.",
            ]
          : [`Approval ${id}${a ? ` (${a.capability})` : ""} is rejected: it never runs. ${requesters} next ${executeCall(id)} is told so.`],
        ...(entry ? { entry } : {}),
        path: stepPath(id),
      }),
    );
  });

  router.get("/spend/:requestSeq", signedIn, async (req, res) => {
    const { consoleCall: ctx } = res.locals as SignedInLocals;
    const seq = String(req.params["requestSeq"]);
    if (!REQUEST_SEQ.test(seq)) return refuse(req, res, 404, "Not found", "There is no spend request with this number (a request_seq is a ledger sequence number).");
    if (!deps.ledger) return refuse(req, res, 503, "No ledger", "This server has no audit ledger configured: spend requests cannot be shown.");
    const { request } = await deps.ledger.getSpendRequest({ requestSeq: BigInt(seq) }, { ctx });
    if (!request) return refuse(req, res, 404, "Not found", `There is no spend request ${seq} in this tenant.`);
    send(
      res,
      200,
      approvalPage(frame(req, res), spendRequestView(request), {
        path: spendPath(request.requestSeq),
        pending: request.state === "PENDING",
        status: request.state,
        ...(request.answeredBy
          ? { answered: { by: request.answeredBy, ...(request.answerChannel ? { channel: request.answerChannel } : {}), ...(request.answerSeq ? { ledgerSeq: request.answerSeq } : {}) } }
          : {}),
        channels: acceptedChannels(request.channels),
        ...(request.channelsRule ? { channelsRule: request.channelsRule } : {}),
        ways: otherWays(ctx, { kind: "spend", requestSeq: Number(request.requestSeq) }, request.channels),
        ownRequest: request.requestedBy === ctx.principal,
        argumentsVerified: request.argumentsVerified,
        rejectReason: true,
      }),
    );
  });

  router.post("/spend/:requestSeq", ...formPost, signedIn, csrfChecked, async (req, res) => {
    const { consoleCall: ctx } = res.locals as SignedInLocals;
    const seq = String(req.params["requestSeq"]);
    if (!REQUEST_SEQ.test(seq)) return refuse(req, res, 404, "Not found", "There is no spend request with this number (a request_seq is a ledger sequence number).");
    if (!deps.ledger) return refuse(req, res, 503, "No ledger", "This server has no audit ledger configured: spend requests cannot be answered.");
    const approve = decisionOf(req);
    if (approve === undefined) return noDecision(req, res);
    const reason = field(req, "reason")?.trim() ?? "";
    if (reason.length > 500) return refuse(req, res, 400, "Refused", `This form was refused: reason is ${reason.length} characters, at most 500.`);
    const requestSeq = Number(seq);
    // Read first: another tenant's (or no) request is not found, not answered.
    const { request } = await deps.ledger.getSpendRequest({ requestSeq: BigInt(seq) }, { ctx });
    if (!request) return refuse(req, res, 404, "Not found", `There is no spend request ${seq} in this tenant.`);
    const subject = { kind: "spend", requestSeq } as const;
    const about = request.tool ? `${request.tool} under spend policy ${request.policy}` : `a spend under spend policy ${request.policy}`;
    const requester = request.requestedBy;
    let headline: string;
    let lines: string[];
    let seqOfAnswer: bigint;
    try {
      // The ledger checks policy's channels now, no self-approval, expiry and once-only.
      if (approve) {
        const r = await deps.ledger.approveSpend({ requestSeq: BigInt(seq), approvedVia: "console" }, { ctx });
        seqOfAnswer = r.ledgerSeq;
        headline = `Approved as ${ctx.principal} (${r.channel || "console"})`;
        const gateReason = typeof r.result?.["reason"] === "string" ? r.result["reason"] : "";
        // The caps that blocked it, with their values (the ledger's words beside CHP's reason).
        const caps = decidedBy(r.result);
        lines =
          r.state === "LOCKED"
            ? [
                `Spend request ${seq} (${about}) is approved: the spend gate, run again under the current policy, locked it.`,
                request.kind === "finance"
                  ? `The requester, ${requester}, receives the receipt with their next ${approveSpendCall(requestSeq)}, or the ${request.tool} call itself picks the approval up and runs once.`
                  : `The requester, ${requester}, receives the approval with their next ${approveSpendCall(requestSeq)}, once.`,
              ]
            : [`The answer is recorded, but the spend gate, run again under the current policy, left it ${r.state}${gateReason ? ` (${gateReason})` : ""}${caps ? `: ${caps}` : ""}. Nothing runs on it.`];
      } else {
        const r = await deps.ledger.declineSpend({ requestSeq: BigInt(seq), approvedVia: "console", reason }, { ctx });
        seqOfAnswer = r.ledgerSeq;
        headline = `Rejected as ${ctx.principal} (${r.channel || "console"})`;
        lines = [
          `Spend request ${seq} (${about}) is declined: it never runs.${reason ? ` Your reason, shown to ${requester}: ${reason}` : ""}`,
          `The requester's (${requester}'s) next ${approveSpendCall(requestSeq)}${request.tool ? ` or ${request.tool} call` : ""} is told so.`,
        ];
      }
    } catch (err) {
      return answerRefused(req, res, err, subject);
    }
    deps.logger.info({ tenant: ctx.tenant, principal: ctx.principal, requestSeq, approve }, "console answered a spend request");
    const entry = await ledgerEntry(ctx, seqOfAnswer);
    send(res, 200, answerResultPage(frame(req, res), { headline, lines, ...(entry ? { entry } : {}), path: spendPath(requestSeq) }));
  });

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
