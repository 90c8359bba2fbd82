import type { Request, Response, Router } from "express";
import { ISSUED_KEY_PREFIX } from "@chaos-core/kit";
import { hashApiKey } from "../auth/api-keys.js";
import { APPROVER_SCOPE } from "../auth/scopes.js";
import { REGISTRY_KEY_MARK } from "../sessions/session-store.js";
import { newCsrfToken, signInToken } from "./csrf.js";
import { cookie, cookieNames, readCookie } from "./headers.js";
import { OAUTH_FLOW_SECONDS, SignInRefused } from "./oauth-sign-in.js";
import type { ConsoleRouterOptions } from "./options.js";
import { linkSignInPage } from "./pages.js";
import { field, nextPage, SIGN_IN_COOKIE_SECONDS, type ConsoleReplies, type SignedInLocals } from "./replies.js";
import type { SessionGate } from "./session-gate.js";
import { OAUTH_SIGN_IN, OPERATOR_LINK } from "./sessions.js";

/** A refusal's message as the sentence a page shows: capitalised, with its full stop. */
const asSentence = (message: string) => `${message.charAt(0).toUpperCase()}${message.slice(1)}.`;

/** The refusal an agent's key gets at sign-in (docs/approvals.md §2): no agent approves its own request. */
export const NOT_AN_APPROVER = "this key does not hold the approver role: an agent's key cannot sign in here";

/**
 * The console's sign-in routes: with an API key, through the edge's OAuth issuer, with the
 * standalone operator's one-time link; and sign-out.
 */
export function signInRoutes(router: Router, options: ConsoleRouterOptions, replies: ConsoleReplies, gate: SessionGate): void {
  const { deps, sessions, keys, directory, signInLinks, oauthSignIn, signingKey } = options;
  const { place, frame, send, refuse, refuseSignIn, showSignIn } = replies;
  const { formPost, signedIn, csrfChecked, startSession, endSession, tooManyFailures, signInFormValid, remoteAddress } = gate;

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
}
